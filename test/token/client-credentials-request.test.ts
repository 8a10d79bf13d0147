import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import { buildTokenRequest, formEncode, requestToken } from "../../src/token/client-credentials.js";
import { makeSpec, TEST_SECRET } from "./helpers.js";
import {
  type CapturedRequest,
  headersOf,
  IDP_ORIGIN,
  JSON_HEADERS,
  tokenBody,
  useMockAgent,
} from "./mock-idp.js";

const agent = useMockAgent();
const credentials = { clientId: "demo client+1", clientSecret: TEST_SECRET };

async function capture(spec = makeSpec()): Promise<CapturedRequest> {
  let captured: CapturedRequest | undefined;
  const path = new URL(spec.tokenUrl).pathname;
  agent()
    .get(IDP_ORIGIN)
    .intercept({ path, method: "POST" })
    .reply((opts) => {
      captured = {
        path: opts.path,
        method: opts.method,
        headers: headersOf(opts.headers),
        body: String(opts.body),
      };
      return { statusCode: 200, data: tokenBody(), responseOptions: JSON_HEADERS };
    });
  const response = await requestToken(spec, credentials, { dispatcher: agent(), timeoutMs: 1000 });
  expect(response.accessToken).toMatch(/^eyJ/);
  return captured!;
}

describe("token request encoding", () => {
  it("form: the exact content type, Accept, and a secret with + & = % space é 🙂 round-trips", async () => {
    const req = await capture();
    expect(req.method).toBe("POST");
    expect(req.path).toBe("/iam/v1/oauth2/token");
    expect(req.headers["content-type"]).toBe("application/x-www-form-urlencoded;charset=UTF-8");
    expect(req.headers.accept).toBe("application/json");
    expect(req.headers["x-version"]).toBeUndefined();
    expect(req.headers.authorization).toBeUndefined();
    const params = new URLSearchParams(req.body);
    expect([...params.keys()]).toEqual(["grant_type", "client_id", "client_secret"]);
    expect(params.get("grant_type")).toBe("client_credentials");
    expect(params.get("client_id")).toBe("demo client+1");
    expect(params.get("client_secret")).toBe(TEST_SECRET);
    // Raw encoding: space as +, reserved characters percent-encoded, UTF-8 for non-ASCII.
    expect(req.body).toContain("client_secret=s3cr3t-%2B%26%3D%25+%C3%A9%F0%9F%99%82-value");
  });

  it("json: application/json with the three fields", async () => {
    const req = await capture(makeSpec({ format: "json" }));
    expect(req.headers["content-type"]).toBe("application/json");
    expect(JSON.parse(req.body)).toEqual({
      grant_type: "client_credentials",
      client_id: "demo client+1",
      client_secret: TEST_SECRET,
    });
  });

  it("basic: RFC 6749 §2.3.1 form-encodes id and secret before base64, and keeps them out of the body", async () => {
    const req = await capture(makeSpec({ clientAuth: "basic" }));
    const auth = req.headers.authorization!;
    expect(auth).toMatch(/^Basic [A-Za-z0-9+/]+=*$/);
    const decoded = Buffer.from(auth.slice(6), "base64").toString("utf8");
    expect(decoded).toBe("demo+client%2B1:s3cr3t-%2B%26%3D%25+%C3%A9%F0%9F%99%82-value");
    const [id, secret] = decoded
      .split(":")
      .map((part) => new URLSearchParams(`v=${part}`).get("v"));
    expect(id).toBe(credentials.clientId);
    expect(secret).toBe(TEST_SECRET);
    expect(req.body).toBe("grant_type=client_credentials");
  });

  it("sends scope and extra parameters only when configured, never an empty scope", async () => {
    const plain = await capture();
    expect(plain.body).not.toContain("scope");
    const scoped = await capture(
      makeSpec({
        scope: "files:read files:write",
        extraParams: { audience: "api://x", scope: "evil" },
      }),
    );
    const params = new URLSearchParams(scoped.body);
    expect(params.getAll("scope")).toEqual(["files:read files:write"]);
    expect(params.get("audience")).toBe("api://x");
    const empty = await buildTokenRequest(makeSpec({ scope: "" }), credentials);
    expect(empty.body).not.toContain("scope");
  });

  it("preview: X-Version on the token request; extra headers cannot replace the protocol ones", async () => {
    const req = await capture(
      makeSpec({
        tokenUrl: `${IDP_ORIGIN}/oauth2/token`,
        versionHeader: SCRIPTING_PREVIEW_HEADER,
        extraHeaders: { "X-Tenant": "t1", "Content-Type": "text/plain", Accept: "*/*" },
      }),
    );
    expect(req.path).toBe("/oauth2/token");
    expect(req.headers["x-version"]).toBe(SCRIPTING_PREVIEW_HEADER);
    expect(req.headers["x-tenant"]).toBe("t1");
    expect(req.headers["content-type"]).toBe("application/x-www-form-urlencoded;charset=UTF-8");
    expect(req.headers.accept).toBe("application/json");
  });

  it("refuses a plain-http token URL unless allowInsecureHttp", async () => {
    const spec = makeSpec({ tokenUrl: "http://idp.test/token" });
    await expect(
      requestToken(spec, credentials, { dispatcher: agent(), timeoutMs: 1000 }),
    ).rejects.toMatchObject({
      code: "BP_ERR_CONFIG_INVALID",
    });
  });

  it("form encoding round-trips any string (property)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: "binary" }),
        fc.string({ unit: "grapheme" }),
        async (id, secret) => {
          const { body } = await buildTokenRequest(makeSpec(), {
            clientId: id,
            clientSecret: secret,
          });
          const params = new URLSearchParams(body);
          // Lone surrogates cannot be UTF-8 encoded; they come back as U+FFFD, like any form encoder.
          expect(params.get("client_id")).toBe(Buffer.from(id, "utf8").toString("utf8"));
          expect(params.get("client_secret")).toBe(secret);
          expect(new URLSearchParams(`v=${formEncode(secret)}`).get("v")).toBe(secret);
        },
      ),
      { numRuns: 150 },
    );
  });
});
