/**
 * Issue #24: `token_type` decides whether a token is DPoP-bound (RFC 9449 §5). Without
 * `upstreams[].dpop` a DPoP token is refused, naming the setting that would make it usable; with
 * it, an unbound answer (`Bearer`, or none: the server ignored the proof) is refused rather than
 * used as a bearer token, which would silently drop the protection the operator asked for.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BearerProxyError } from "../../src/errors.js";
import { requestToken } from "../../src/token/client-credentials.js";
import { createDpop, type Dpop } from "../../src/token/dpop/index.js";
import { makeTokenSpec } from "../helpers/upstream-config.js";
import { IDP_ORIGIN, JSON_HEADERS, tokenBody, useMockAgent } from "../token/mock-idp.js";

const agent = useMockAgent();
let dpop: Dpop;
beforeAll(async () => {
  dpop = await createDpop({}, { pollIntervalMs: 0 });
});
afterAll(() => dpop.close());

const credentials = { clientId: "demo-client", clientSecret: "s3cret-value" };

async function answer(body: string, withDpop: boolean): Promise<BearerProxyError | unknown> {
  const spec = makeTokenSpec(
    { baseUrl: IDP_ORIGIN, clientSecret: credentials.clientSecret },
    withDpop ? { dpop: { keyFile: undefined, algorithm: undefined } } : {},
  );
  agent()
    .get(IDP_ORIGIN)
    .intercept({ path: new URL(spec.tokenUrl).pathname, method: "POST" })
    .reply(200, body, JSON_HEADERS);
  return requestToken(spec, credentials, {
    dispatcher: agent(),
    timeoutMs: 2_000,
    ...(withDpop ? { dpop } : {}),
  }).catch((error: unknown) => error);
}

describe("token_type and dpop", () => {
  it("refuses a DPoP token without dpop configured, naming upstreams[].dpop", async () => {
    for (const type of ["DPoP", "dpop"]) {
      const error = await answer(tokenBody({ token_type: type }), false);
      expect(error).toMatchObject({
        code: "BP_ERR_TOKEN_RESPONSE_INVALID",
        publicCode: "token_unavailable",
        message: expect.stringContaining("set upstreams[].dpop to use DPoP-bound tokens"),
      });
      expect((error as BearerProxyError).message).toContain(`token_type is "${type}"`);
    }
  });

  it("refuses an unbound token when dpop is configured: Bearer, any case, or no token_type", async () => {
    for (const body of [
      tokenBody({ token_type: "Bearer" }),
      tokenBody({ token_type: "bearer" }),
      tokenBody({ token_type: undefined }),
    ]) {
      const error = await answer(body, true);
      expect(error).toMatchObject({
        code: "BP_ERR_TOKEN_RESPONSE_INVALID",
        message: expect.stringMatching(
          /expected "DPoP" because upstreams\[\]\.dpop is set: the token endpoint ignored the DPoP proof/,
        ),
        details: { expectedTokenType: "DPoP" },
      });
      // Never the token itself.
      expect((error as Error).message).not.toContain("eyJ");
    }
  });

  it("takes a DPoP token, in any case, when dpop is configured", async () => {
    for (const type of ["DPoP", "dpop", "DPOP"]) {
      const response = await answer(tokenBody({ token_type: type }), true);
      expect(response).toMatchObject({ tokenType: "DPoP", expiresInSeconds: 599 });
    }
  });
});
