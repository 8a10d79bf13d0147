import { describe, expect, it } from "vitest";
import { BearerProxyError } from "../../src/errors.js";
import { formEncode, requestToken } from "../../src/token/client-credentials.js";
import { makeSpec, TEST_SECRET } from "./helpers.js";
import { IDP_ORIGIN, JSON_HEADERS, tokenBody, useMockAgent } from "./mock-idp.js";

const agent = useMockAgent();
const credentials = { clientId: "demo-client", clientSecret: TEST_SECRET };
const PATH = "/iam/v1/oauth2/token";

function reply(
  status: number,
  body: string,
  headers: Record<string, string> = JSON_HEADERS.headers,
) {
  agent()
    .get(IDP_ORIGIN)
    .intercept({ path: PATH, method: "POST" })
    .reply(status, body, { headers });
}

async function fetchError(): Promise<BearerProxyError> {
  const error = await requestToken(makeSpec(), credentials, {
    dispatcher: agent(),
    timeoutMs: 2000,
    wallNow: () => Date.UTC(2026, 0, 1, 12, 0, 0),
  }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(BearerProxyError);
  const bpe = error as BearerProxyError;
  // Never a secret, never anything the server sent as a token.
  expect(bpe.message).not.toContain(TEST_SECRET);
  expect(bpe.message).not.toContain("eyJ");
  expect(bpe.message).toContain(`${IDP_ORIGIN}${PATH}`);
  return bpe;
}

describe("valid token responses", () => {
  it("accepts the spec's response and reports the lifetime and scope", async () => {
    reply(200, tokenBody({ token_type: "bearer" }), {
      "content-type": "application/json; charset=utf-8",
    });
    const response = await requestToken(makeSpec(), credentials, {
      dispatcher: agent(),
      timeoutMs: 1000,
    });
    expect(response).toEqual({
      accessToken: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZW1vIn0.c2lnbmF0dXJl",
      expiresInSeconds: 599,
      scope: "files:read files:write",
      expiresInClamped: false,
    });
  });

  it("missing expires_in is left to the policy default; no scope is undefined", async () => {
    reply(200, JSON.stringify({ access_token: "abc~+/=", token_type: "Bearer" }));
    const response = await requestToken(makeSpec(), credentials, {
      dispatcher: agent(),
      timeoutMs: 1000,
    });
    expect(response.expiresInSeconds).toBeUndefined();
    expect(response.scope).toBeUndefined();
  });

  it("expires_in above 24 h is clamped and flagged", async () => {
    reply(200, tokenBody({ expires_in: 10 * 86_400 }));
    const response = await requestToken(makeSpec(), credentials, {
      dispatcher: agent(),
      timeoutMs: 1000,
    });
    expect(response.expiresInSeconds).toBe(86_400);
    expect(response.expiresInClamped).toBe(true);
  });
});

describe("malformed 200 responses are BP_ERR_TOKEN_RESPONSE_INVALID", () => {
  const cases: [string, string, Record<string, string> | undefined, RegExp][] = [
    [
      "an HTML page",
      "<html><body>Login</body></html>",
      { "content-type": "text/html" },
      /content type text\/html/,
    ],
    [
      "no content type and a body that is neither JSON nor form fields",
      "hello",
      {},
      /no content type and a body that is neither JSON nor form fields/,
    ],
    [
      "a form body naming access_token twice",
      "access_token=a&access_token=b&token_type=Bearer",
      { "content-type": "application/x-www-form-urlencoded" },
      /names access_token more than once/,
    ],
    ["JSON that does not parse", "{access_token:", undefined, /not a JSON object/],
    ["a JSON array", "[]", undefined, /not a JSON object/],
    [
      "access_token missing",
      JSON.stringify({ token_type: "Bearer" }),
      undefined,
      /access_token is missing/,
    ],
    [
      "access_token a number",
      tokenBody({ access_token: 42 }),
      undefined,
      /access_token is missing/,
    ],
    ["access_token empty", tokenBody({ access_token: "" }), undefined, /access_token/],
    [
      "CR/LF in the token",
      tokenBody({ access_token: "eyJabc\r\nX-Evil: 1" }),
      undefined,
      /RFC 6750/,
    ],
    ["a space in the token", tokenBody({ access_token: "eyJ abc" }), undefined, /RFC 6750/],
    [
      "a control character in the token",
      tokenBody({ access_token: "eyJ\u0000abc" }),
      undefined,
      /RFC 6750/,
    ],
    ["token_type mac", tokenBody({ token_type: "mac" }), undefined, /token_type is "mac"/],
    [
      "token_type DPoP",
      tokenBody({ token_type: "DPoP" }),
      undefined,
      /token_type is "DPoP", which bearer-proxy cannot use: .*RFC 9449/,
    ],
    [
      "token_type N_A",
      tokenBody({ token_type: "N_A" }),
      undefined,
      /token_type is "N_A", which bearer-proxy cannot use/,
    ],
    [
      "token_type BearerToken not listed",
      tokenBody({ token_type: "BearerToken" }),
      undefined,
      /token_type is "BearerToken", expected "Bearer"; .*add "BearerToken" to token.acceptTokenTypes/,
    ],
    ["token_type null", tokenBody({ token_type: null }), undefined, /token_type is null/],
    ["non-ASCII in the token", tokenBody({ access_token: "eyJé" }), undefined, /RFC 6750/],
    ["expires_in 0", tokenBody({ expires_in: 0 }), undefined, /expires_in is the number 0/],
    [
      "expires_in negative",
      tokenBody({ expires_in: -5 }),
      undefined,
      /expires_in is the number -5/,
    ],
    [
      "expires_in a string that is not a number",
      tokenBody({ expires_in: "599s" }),
      undefined,
      /expires_in is a string that is not a number of seconds/,
    ],
    [
      "expires_in a negative string",
      tokenBody({ expires_in: "-5" }),
      undefined,
      /expires_in is a string that is not a number/,
    ],
    [
      "expires_in the string 0",
      tokenBody({ expires_in: "0" }),
      undefined,
      /expires_in is the string "0"/,
    ],
    [
      "expires_in too big to be a number",
      '{"access_token":"a","token_type":"Bearer","expires_in":1e999}',
      undefined,
      /expires_in is not a finite number/,
    ],
    ["expires_in null", tokenBody({ expires_in: null }), undefined, /expires_in is null/],
    [
      "expires_in below one second",
      tokenBody({ expires_in: 0.5 }),
      undefined,
      /expires_in is the number 0.500/,
    ],
  ];
  for (const [name, body, headers, pattern] of cases) {
    it(name, async () => {
      reply(200, body, headers);
      const error = await fetchError();
      expect(error.code).toBe("BP_ERR_TOKEN_RESPONSE_INVALID");
      expect(error.publicCode).toBe("token_unavailable");
      expect(error.message).toMatch(pattern);
      expect(error.message).not.toContain("X-Evil");
    });
  }

  it("a body over 64 KiB is refused", async () => {
    reply(200, tokenBody({ padding: "x".repeat(70_000) }));
    const error = await fetchError();
    expect(error.code).toBe("BP_ERR_TOKEN_RESPONSE_INVALID");
    expect(error.message).toMatch(/over 65536 bytes/);
  });
});

describe("error responses", () => {
  it("invalid_client is a rejection (502 token_rejected) that says what to check", async () => {
    reply(
      401,
      JSON.stringify({
        error: "invalid_client",
        error_description: "Client authentication failed",
      }),
    );
    const error = await fetchError();
    expect(error.code).toBe("BP_ERR_TOKEN_REJECTED");
    expect(error.statusCode).toBe(502);
    expect(error.message).toContain("401 (invalid_client: Client authentication failed)");
    expect(error.message).toContain("check clientId/clientSecret");
    expect(error.details).toEqual({
      status: 401,
      idpError: "invalid_client",
      idpErrorDescription: "Client authentication failed",
      hint: "the token endpoint rejected the client credentials: check clientId/clientSecret",
    });
    expect(error.retryAfterSeconds).toBeUndefined();
  });

  for (const idpError of [
    "unauthorized_client",
    "invalid_grant",
    "unsupported_grant_type",
    "invalid_scope",
  ]) {
    it(`${idpError} on a 400 is a rejection`, async () => {
      reply(400, JSON.stringify({ error: idpError }));
      const error = await fetchError();
      expect(error.code).toBe("BP_ERR_TOKEN_REJECTED");
      expect(error.details?.idpError).toBe(idpError);
    });
  }

  it("a bare 403 is a rejection; a 400 invalid_request is not", async () => {
    reply(403, "forbidden", { "content-type": "text/plain" });
    expect((await fetchError()).code).toBe("BP_ERR_TOKEN_REJECTED");
    reply(400, JSON.stringify({ error: "invalid_request" }));
    expect((await fetchError()).code).toBe("BP_ERR_TOKEN_HTTP");
  });

  it("the IdP's text is stripped of control characters, truncated, and never echoes our secret", async () => {
    reply(
      400,
      JSON.stringify({
        error: "invalid_client\r\nX-Injected: 1",
        error_description: `bad secret ${TEST_SECRET}\u001b[31m ${"y".repeat(500)}`,
      }),
    );
    const error = await fetchError();
    expect(error.message).not.toMatch(/[\r\n\u001b]/);
    expect(error.message).toContain("[redacted]");
    expect(String(error.details?.idpErrorDescription).length).toBeLessThanOrEqual(200);
  });

  it("never echoes the secret in the encodings it was sent in (form, percent, JSON, Basic)", async () => {
    const basic = Buffer.from(`demo-client:${formEncode(TEST_SECRET)}`).toString("base64");
    const forms = [
      formEncode(TEST_SECRET),
      encodeURIComponent(TEST_SECRET),
      JSON.stringify(TEST_SECRET).slice(1, -1),
      basic,
    ];
    for (const form of forms) {
      reply(400, JSON.stringify({ error: "invalid_request", error_description: `got ${form}` }));
      const error = await fetchError();
      expect(error.message).not.toContain(form);
      expect(String(error.details?.idpErrorDescription)).toBe("got [redacted]");
    }
  });

  it("429 with Retry-After seconds is honoured", async () => {
    reply(429, JSON.stringify({ error: "slow_down" }), {
      "content-type": "application/json",
      "retry-after": "7",
    });
    const error = await fetchError();
    expect(error.code).toBe("BP_ERR_TOKEN_HTTP");
    expect(error.retryAfterSeconds).toBe(7);
    expect(error.message).toContain("429 (slow_down)");
  });

  it("503 with an HTTP-date Retry-After, and an HTML body", async () => {
    reply(503, "<html>down</html>", {
      "content-type": "text/html",
      "retry-after": new Date(Date.UTC(2026, 0, 1, 12, 0, 42)).toUTCString(),
    });
    const error = await fetchError();
    expect(error.code).toBe("BP_ERR_TOKEN_HTTP");
    expect(error.retryAfterSeconds).toBe(42);
    expect(error.message).toContain("503 (content type text/html)");
    expect(error.statusCode).toBe(503);
  });

  for (const status of [301, 302, 307, 308]) {
    it(`${status} is never followed and never names the Location`, async () => {
      reply(status, "", { location: "https://evil.test/steal?client_secret=x" });
      const error = await fetchError();
      expect(error.code).toBe("BP_ERR_TOKEN_REDIRECT");
      expect(error.message).toContain(`answered ${status}`);
      expect(error.message).not.toContain("evil.test");
    });
  }

  it("a network error keeps its cause", async () => {
    agent()
      .get(IDP_ORIGIN)
      .intercept({ path: PATH, method: "POST" })
      .replyWithError(
        Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:443"), { code: "ECONNREFUSED" }),
      );
    const error = await fetchError();
    expect(error.code).toBe("BP_ERR_TOKEN_NETWORK");
    expect(error.cause).toBeInstanceOf(Error);
    expect(error.message).toContain("ECONNREFUSED");
  });

  it("a response that never comes times out with BP_ERR_TOKEN_TIMEOUT", async () => {
    agent()
      .get(IDP_ORIGIN)
      .intercept({ path: PATH, method: "POST" })
      .reply(200, tokenBody(), JSON_HEADERS)
      .delay(5_000);
    const started = performance.now();
    const error = await requestToken(makeSpec(), credentials, {
      dispatcher: agent(),
      timeoutMs: 150,
    }).catch((e: BearerProxyError) => e);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(error).toMatchObject({ code: "BP_ERR_TOKEN_TIMEOUT" });
    expect((error as Error).message).toContain("within 150 ms");
  });
});
