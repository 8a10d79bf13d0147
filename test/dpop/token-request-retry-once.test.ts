/**
 * Issue #24, the token request's walk (client-credentials.ts) against a mock endpoint: the
 * `DPoP` field is a fresh proof for POST and the token URL without its query; `use_dpop_nonce`
 * is retried once, rebuilt whole (a new proof with the nonce, a new private-key-jwt assertion
 * `jti`), and a second `use_dpop_nonce` is the answer; a `DPoP-Nonce` in any answer is kept.
 */
import { readFile } from "node:fs/promises";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BearerProxyError } from "../../src/errors.js";
import { requestToken } from "../../src/token/client-credentials.js";
import { createDpop, type Dpop } from "../../src/token/dpop/index.js";
import { createDpopKeyDir, type DpopKeyDir } from "../helpers/dpop-keys.js";
import { makeTokenSpec } from "../helpers/upstream-config.js";
import {
  type CapturedRequest,
  headersOf,
  IDP_ORIGIN,
  tokenBody,
  useMockAgent,
} from "../token/mock-idp.js";

const agent = useMockAgent();
let keys: DpopKeyDir;
let dpop: Dpop;
beforeAll(async () => {
  keys = await createDpopKeyDir();
  dpop = await createDpop({}, { pollIntervalMs: 0 });
});
afterAll(async () => {
  dpop.close();
  await keys.remove();
});

const TOKEN_PATH = "/oauth2/token";
const NONCE_ERROR = JSON.stringify({
  error: "use_dpop_nonce",
  error_description: "Authorization server requires nonce in DPoP proof",
});

/** Answers each token request with the next of `answers`, recording the requests. */
function endpoint(answers: { status: number; body: string; nonce?: string }[]): CapturedRequest[] {
  const seen: CapturedRequest[] = [];
  for (const answer of answers) {
    agent()
      .get(IDP_ORIGIN)
      .intercept({ path: `${TOKEN_PATH}?tenant=a`, method: "POST" })
      .reply((opts) => {
        seen.push({
          path: opts.path,
          method: opts.method,
          headers: headersOf(opts.headers),
          body: String(opts.body),
        });
        return {
          statusCode: answer.status,
          data: answer.body,
          responseOptions: {
            headers: {
              "content-type": "application/json",
              ...(answer.nonce ? { "dpop-nonce": answer.nonce } : {}),
            },
          },
        };
      });
  }
  return seen;
}

async function privateKeyJwtSpec() {
  const clientKeyFile = await keys.write("client.pem", "ec-p256");
  const spec = makeTokenSpec({
    tokenUrl: `${IDP_ORIGIN}${TOKEN_PATH}?tenant=a`,
    clientAuth: "private-key-jwt",
    clientKeyFile,
    clientSecret: undefined,
    dpop: {},
  });
  return {
    spec,
    credentials: { clientId: "demo-client", clientKeyPem: await readFile(clientKeyFile, "utf8") },
  };
}

const proofOf = (request: CapturedRequest) => request.headers.dpop!;
const assertionOf = (request: CapturedRequest) =>
  new URLSearchParams(request.body).get("client_assertion")!;

describe("the DPoP token request", () => {
  it("retries use_dpop_nonce once, with a new proof carrying the nonce and a new assertion", async () => {
    const { spec, credentials } = await privateKeyJwtSpec();
    const seen = endpoint([
      { status: 400, body: NONCE_ERROR, nonce: "n-1" },
      { status: 200, body: tokenBody({ token_type: "DPoP" }), nonce: "n-2" },
    ]);
    const response = await requestToken(spec, credentials, {
      dispatcher: agent(),
      timeoutMs: 2_000,
      dpop,
    });
    expect(response.tokenType).toBe("DPoP");
    expect(seen).toHaveLength(2);
    const [first, second] = seen.map((r) => decodeJwt(proofOf(r)));
    expect(decodeProtectedHeader(proofOf(seen[0]!)).typ).toBe("dpop+jwt");
    expect(first).toMatchObject({ htm: "POST", htu: `${IDP_ORIGIN}${TOKEN_PATH}` });
    expect(first!.nonce).toBeUndefined();
    expect(second).toMatchObject({ htm: "POST", nonce: "n-1" });
    expect(second!.jti).not.toBe(first!.jti);
    expect(first!.ath).toBeUndefined(); // no access token goes to the token endpoint
    expect(decodeJwt(assertionOf(seen[1]!)).jti).not.toBe(decodeJwt(assertionOf(seen[0]!)).jti);
    // The nonce of the successful answer is the one kept for next time.
    expect(dpop.nonces.get(IDP_ORIGIN)).toBe("n-2");
  });

  it("takes a second use_dpop_nonce as the answer: two requests, no more", async () => {
    const { spec, credentials } = await privateKeyJwtSpec();
    const seen = endpoint([
      { status: 400, body: NONCE_ERROR, nonce: "n-3" },
      { status: 400, body: NONCE_ERROR, nonce: "n-4" },
    ]);
    const failure = await requestToken(spec, credentials, {
      dispatcher: agent(),
      timeoutMs: 2_000,
      dpop,
    }).catch((error: BearerProxyError) => error);
    expect(seen).toHaveLength(2);
    expect(failure).toMatchObject({
      code: "BP_ERR_TOKEN_HTTP",
      message: expect.stringContaining("answered 400 (use_dpop_nonce"),
    });
    expect(decodeJwt(proofOf(seen[1]!)).nonce).toBe("n-3");
  });

  it("without dpop sends no DPoP field and never retries a 400", async () => {
    const { spec, credentials } = await privateKeyJwtSpec();
    const seen = endpoint([{ status: 400, body: NONCE_ERROR, nonce: "n-5" }]);
    await expect(
      requestToken({ ...spec, dpop: undefined }, credentials, {
        dispatcher: agent(),
        timeoutMs: 2_000,
      }),
    ).rejects.toMatchObject({ code: "BP_ERR_TOKEN_HTTP" });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.dpop).toBeUndefined();
  });

  it("a 200 answer needs no retry", async () => {
    const { spec, credentials } = await privateKeyJwtSpec();
    dpop.nonces.set(IDP_ORIGIN, "n-known");
    const seen = endpoint([{ status: 200, body: tokenBody({ token_type: "dpop" }) }]);
    const response = await requestToken(spec, credentials, {
      dispatcher: agent(),
      timeoutMs: 2_000,
      dpop,
    });
    expect(response.tokenType).toBe("DPoP");
    expect(seen).toHaveLength(1);
    // A nonce learnt before rides along from the first request.
    expect(decodeJwt(proofOf(seen[0]!)).nonce).toBe("n-known");
  });
});
