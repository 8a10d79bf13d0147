/**
 * Issue 16: what real providers send that RFC 6749 §5.1 does not say, read by the one
 * field-by-field checker (src/token/token-response.ts). Each case names the provider it stands
 * for; test/idp/ replays the same shapes over real TLS.
 */
import { describe, expect, it } from "vitest";
import { isBearerTokenSyntax } from "../../src/base/bearer-token.js";
import { BearerProxyError } from "../../src/errors.js";
import { authorizationValue } from "../../src/proxy/credential.js";
import { decryptToken, deriveTokenKey, encryptToken } from "../../src/token/redis-crypto.js";
import { parseTokenResponse, type ResponseContext } from "../../src/token/token-response.js";

const JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZW1vIn0.c2lnbmF0dXJl";
const CONTEXT: ResponseContext = {
  where: "https://idp.test/token",
  secrets: ["s3cret-value"],
  clientId: "my-client",
  wallNow: () => 0,
};
const JSON_TYPE = { "content-type": "application/json" };

function parse(
  body: unknown,
  headers: Record<string, string> = JSON_TYPE,
  context: Partial<ResponseContext> = {},
) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return parseTokenResponse(200, headers, text, { ...CONTEXT, ...context });
}

function refusal(body: unknown, context: Partial<ResponseContext> = {}): BearerProxyError {
  try {
    parse(body, JSON_TYPE, context);
  } catch (error) {
    expect(error).toBeInstanceOf(BearerProxyError);
    return error as BearerProxyError;
  }
  throw new Error("expected a refusal");
}

describe("expires_in", () => {
  it.each([
    ["a numeric string (Azure AD v1, ADFS, Apigee)", "3599", 3599],
    ["a numeric string with a fraction", "3599.9", 3599],
    ["a float with .0", 3599.0, 3599],
    ["a float", 35999.87, 35999],
    ["one second and a bit", 1.2, 1],
  ])("%s is floored to whole seconds", (_name, expiresIn, seconds) => {
    const response = parse({ access_token: JWT, token_type: "Bearer", expires_in: expiresIn });
    expect(response.expiresInSeconds).toBe(seconds);
  });

  it("a numeric string above 24 h is clamped like a number", () => {
    const response = parse({ access_token: JWT, token_type: "Bearer", expires_in: "864000" });
    expect(response).toMatchObject({ expiresInSeconds: 86_400, expiresInClamped: true });
  });

  it.each([
    [" 3599", /a string that is not a number of seconds/],
    ["3599s", /a string that is not a number of seconds/],
    ["1e3", /a string that is not a number of seconds/],
    ["", /a string that is not a number of seconds/],
    ["0", /the string "0"/],
    ["0.4", /the string "0.4"/],
    [-1.5, /the number -1.500/],
    [true, /a boolean/],
    [[3600], /an array/],
  ])("%j is refused", (expiresIn, pattern) => {
    const error = refusal({ access_token: JWT, token_type: "Bearer", expires_in: expiresIn });
    expect(error.code).toBe("BP_ERR_TOKEN_RESPONSE_INVALID");
    expect(error.message).toMatch(pattern);
    expect(error.message).toMatch(/expected a positive number of seconds/);
  });
});

describe("token_type", () => {
  it.each(["bearer", "BEARER", "Bearer", "bEaReR"])("%s is Bearer (case-insensitive)", (type) => {
    const response = parse({ access_token: JWT, token_type: type, expires_in: 60 });
    expect(response.accessToken).toBe(JWT);
    expect(response.notes).toBeUndefined();
  });

  it("missing (LinkedIn) is Bearer with a note to warn about", () => {
    const response = parse({ access_token: JWT, expires_in: 5183999 });
    expect(response.notes).toEqual([
      {
        code: "token_type_missing",
        message: "token response has no token_type; treating the token as Bearer",
      },
    ]);
  });

  it("Apigee's BearerToken is refused by default and accepted when listed", () => {
    const body = { access_token: JWT, token_type: "BearerToken", expires_in: "1799" };
    expect(refusal(body).message).toContain(
      'token_type is "BearerToken", expected "Bearer"; if it is a bearer token, add "BearerToken" to token.acceptTokenTypes',
    );
    const response = parse(body, JSON_TYPE, { acceptTokenTypes: ["Bearer", "bearertoken"] });
    expect(response.expiresInSeconds).toBe(1799);
  });

  it("DPoP and N_A are refused even when listed", () => {
    for (const type of ["DPoP", "dpop", "N_A"]) {
      const error = refusal(
        { access_token: JWT, token_type: type },
        { acceptTokenTypes: ["Bearer", "DPoP", "N_A"] },
      );
      expect(error.message).toContain(`token_type is "${type}", which bearer-proxy cannot use`);
    }
  });

  it("a token_type with control characters is shown cleaned", () => {
    const error = refusal({ access_token: JWT, token_type: "Bea\r\nrer" });
    expect(error.message).not.toMatch(/[\r\n]/);
  });
});

describe("access_token characters", () => {
  it("accepts every visible ASCII character (Salesforce tokens contain !)", () => {
    const salesforce = "00D5g000004Gxyz!AQ4AQFi8dT.0Ys_kmB9zW~+/=";
    expect(parse({ access_token: salesforce, token_type: "Bearer" }).accessToken).toBe(salesforce);
    const everything = Array.from({ length: 94 }, (_v, i) => String.fromCharCode(0x21 + i)).join(
      "",
    );
    expect(isBearerTokenSyntax(everything)).toBe(true);
  });

  it.each([
    ["empty", ""],
    ["a space", "abc def"],
    ["a tab", "abc\tdef"],
    ["CR/LF", "abc\r\nX-Evil: 1"],
    ["DEL", "abc\u007f"],
    ["NUL", "abc\u0000"],
    ["non-ASCII", "abcé"],
    ["a C1 control", "abc\u0085"],
  ])("refuses %s", (_name, token) => {
    expect(isBearerTokenSyntax(token)).toBe(false);
    const error = refusal({ access_token: token, token_type: "Bearer" });
    expect(error.message).toMatch(/access_token/);
    expect(error.message).not.toContain("X-Evil");
  });
});

describe("one token rule everywhere a token is checked", () => {
  const salesforce = "00D5g000004Gxyz!AQ4AQFi8dT.0Ys";
  const stored = (accessToken: string) => {
    const key = deriveTokenKey("secret", "credential");
    const token = {
      accessToken,
      tokenType: "Bearer",
      scope: undefined,
      obtainedAtWallMs: 0,
      expiresAtWallMs: 60_000,
    };
    return decryptToken(encryptToken(token, key, "credential"), key, "credential");
  };
  const cached = (value: string) => ({
    value,
    fingerprint: "00000000",
    scope: undefined,
    obtainedAtMs: 0,
    expiresAtMs: 1,
    expiresAtWallMs: 1,
    lifetimeMs: 1,
  });

  it("the Redis cache reader accepts a Salesforce token and refuses one that breaks a header", () => {
    expect(stored(salesforce)?.accessToken).toBe(salesforce);
    expect(stored("abc\r\nX-Evil: 1")).toBeUndefined();
    expect(stored("abc def")).toBeUndefined();
  });

  it("header injection writes a Salesforce token and refuses one with a space", () => {
    expect(authorizationValue(cached(salesforce))).toBe(`Bearer ${salesforce}`);
    expect(() => authorizationValue(cached("abc def"))).toThrow(/not allowed in a header/);
  });
});

describe("scope", () => {
  it.each([
    [[], "an array"],
    [["read", "write"], "an array"],
    [7, "the number 7"],
    [null, "null"],
  ])("%j is ignored with a note", (scope, described) => {
    const response = parse({ access_token: JWT, token_type: "Bearer", scope });
    expect(response.scope).toBeUndefined();
    expect(response.notes).toEqual([
      {
        code: "scope_not_string",
        message: `token response scope is ${described}, not a string; ignored`,
      },
    ]);
  });
});

describe("success bodies that are not JSON", () => {
  const form = `access_token=${encodeURIComponent("00D!AQ.x")}&token_type=bearer&expires_in=3600&scope=read+write`;

  it.each([
    ["application/x-www-form-urlencoded", form],
    ["application/x-www-form-urlencoded; charset=ISO-8859-1", form],
    ["text/plain", form],
    ["text/plain; charset=utf-8", `${form}\n`],
  ])("reads form fields labelled %s", (type, body) => {
    const response = parse(body, { "content-type": type });
    expect(response).toEqual({
      accessToken: "00D!AQ.x",
      expiresInSeconds: 3600,
      scope: "read write",
      expiresInClamped: false,
    });
  });

  it("reads JSON labelled text/plain, or with no content type at all", () => {
    const body = JSON.stringify({ access_token: JWT, token_type: "Bearer", expires_in: 60 });
    expect(parse(body, { "content-type": "text/plain" }).accessToken).toBe(JWT);
    expect(parse(body, {}).accessToken).toBe(JWT);
  });

  it("a form body with a __proto__ field is just a field", () => {
    const response = parse("__proto__=x&access_token=abc&token_type=Bearer", {
      "content-type": "application/x-www-form-urlencoded",
    });
    expect(response.accessToken).toBe("abc");
  });

  it("an HTML 200 (a login page) is refused with a scrubbed excerpt", () => {
    let error: BearerProxyError | undefined;
    try {
      parse(
        `<!doctype html><html><head><title>Sign in</title><script>var t="${JWT}"</script></head><body><p>Please sign in, my-client</p></body></html>`,
        { "content-type": "text/html" },
      );
    } catch (e) {
      error = e as BearerProxyError;
    }
    expect(error?.message).toMatch(/content type text\/html, expected application\/json/);
    expect(error?.details?.bodyExcerpt).toBe("Sign in Please sign in, [redacted]");
  });
});

describe("error bodies that are not RFC 6749-shaped", () => {
  function failure(status: number, body: string, type = "application/json") {
    try {
      parseTokenResponse(status, { "content-type": type }, body, CONTEXT);
    } catch (error) {
      return error as BearerProxyError;
    }
    throw new Error("expected an error");
  }

  it.each([
    [
      "Apigee",
      401,
      '{"ErrorCode" : "invalid_client", "Error" :"ClientId is Invalid"}',
      "application/json",
      '{"ErrorCode":"invalid_client","Error":"ClientId is Invalid"}',
      "BP_ERR_TOKEN_REJECTED",
    ],
    [
      "a Spring Boot error",
      403,
      '{"timestamp":"2026-01-01T00:00:00.000+00:00","status":403,"error":"Forbidden","path":"/oauth/token"}',
      "application/json",
      '{"timestamp":"2026-01-01T00:00:00.000+00:00","status":403,"error":"Forbidden","path":"/oauth/token"}',
      "BP_ERR_TOKEN_REJECTED",
    ],
    [
      "nested error object",
      400,
      '{"error":{"code":400,"message":"Bad client my-client"}}',
      "application/json",
      '{"error":{"code":400,"message":"Bad client [redacted]"}}',
      "BP_ERR_TOKEN_HTTP",
    ],
    [
      "an HTML page",
      500,
      "<html><head><style>p{}</style></head><body><h1>500</h1><p>Internal &amp; broken</p></body></html>",
      "text/html",
      "500 Internal & broken",
      "BP_ERR_TOKEN_HTTP",
    ],
    [
      "plain text echoing the secret",
      401,
      "Bad credentials for my-client / s3cret-value",
      "text/plain",
      "Bad credentials for [redacted] / [redacted]",
      "BP_ERR_TOKEN_REJECTED",
    ],
  ])("%s: coded as before, with an excerpt", (_name, status, body, type, excerpt, code) => {
    const error = failure(status, body, type);
    expect(error.code).toBe(code);
    expect(error.details?.bodyExcerpt).toBe(excerpt);
    // The excerpt is for operators (log, /status, check), not for the clients' error body.
    expect(error.message).not.toContain("ClientId is Invalid");
  });

  it("an RFC 6749 error has no excerpt (error and error_description say it)", () => {
    const error = failure(400, '{"error":"invalid_scope","error_description":"no such scope"}');
    expect(error.details?.bodyExcerpt).toBeUndefined();
    expect(error.message).toContain("400 (invalid_scope: no such scope)");
  });

  it("a bare 401 carries the credentials hint", () => {
    const error = failure(401, "Unauthorized", "text/plain");
    expect(error.details?.hint).toBe(
      "the token endpoint rejected the client credentials: check clientId/clientSecret",
    );
    expect(error.message).toContain("check clientId/clientSecret");
  });
});
