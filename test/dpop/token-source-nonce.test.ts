/**
 * Issue #24, the token side against a real authorization server (node-oidc-provider with DPoP
 * and nonces): a source with `dpop: {}` sends a proof with its token request, meets
 * `use_dpop_nonce` once and retries with the nonce (RFC 9449 §8), and hands out a DPoP token
 * bound to its key (`cnf.jkt`), carrying that key for the proxy; the next fetch already knows the
 * nonce. The token and a proof from `token.dpop` pass a resource server that verifies both.
 */
import { decodeJwt } from "jose";
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import type { TokenProvider } from "../../src/token/token-provider.js";
import { createTokenSource } from "../../src/token/token-source.js";
import { captureLogs } from "../token/helpers.js";
import { IMMEDIATE_POLICY, specFor, tokenStatuses, useDpopBench } from "./support.js";

const bench = useDpopBench({ rs: {} });
let source: TokenProvider | undefined;

afterEach(() => {
  source?.close();
  source = undefined;
});

describe("a token source with dpop", () => {
  it("retries use_dpop_nonce once, gets a token bound to its key, and knows the nonce next time", async () => {
    source = createTokenSource({
      upstream: "api",
      spec: specFor(bench.as, {}),
      policy: IMMEDIATE_POLICY,
      dispatcher: bench.agent,
      logger: captureLogs().logger,
      secretPollIntervalMs: 0,
    });
    const token = await source.getToken();
    expect(tokenStatuses(bench.as)).toEqual([400, 200]);
    expect(bench.as.requests.every((r) => r.dpop)).toBe(true);
    expect(token.tokenType).toBe("DPoP");
    expect(token.dpop).toBeDefined();
    expect(decodeJwt(token.value).cnf).toEqual({ jkt: token.dpop!.jkt });
    expect(source.status().dpop).toEqual({ jkt: token.dpop!.jkt, algorithm: "ES256" });

    // What the proxy does with it: Authorization: DPoP and a proof with ath, per request.
    const url = `${bench.rs.origin}/things?x=1`;
    const response = await request(url, {
      dispatcher: bench.agent,
      headers: {
        authorization: token.dpop!.authorization(token.value),
        dpop: token.dpop!.proofFor("GET", url, token.value),
      },
    });
    expect(response.statusCode).toBe(200);
    await response.body.dump();

    // The next fetch carries the nonce from the start: one request.
    expect(source.invalidate(token)).toBe(true);
    const next = await source.getToken();
    expect(tokenStatuses(bench.as)).toEqual([400, 200, 200]);
    expect(next.value).not.toBe(token.value);
    expect(next.dpop).toBe(token.dpop); // one key per credential, for the source's life
    expect(decodeJwt(next.value).cnf).toEqual({ jkt: token.dpop!.jkt });
  });
});
