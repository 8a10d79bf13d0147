import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { waitFor } from "../helpers/wait.js";
import { PROOF_PREFIX, tokenStatuses, useDpopBench } from "./support.js";

/**
 * Issue 24 end to end: a legacy client sends plain HTTP; the proxy gets a DPoP-bound token from
 * a real authorization server (node-oidc-provider, nonces required) and sends every request
 * with `Authorization: DPoP` and a fresh proof to a resource server that verifies each one
 * (signature, htm/htu, iat, jti replay, ath, cnf.jkt, nonce).
 */
describe("DPoP through the proxy", () => {
  const bench = useDpopBench({
    as: { requireNonce: true, accessTokenTtlSeconds: 4 },
    rs: { requireNonce: true },
  });
  let gateway: AppUnderTest;

  beforeAll(async () => {
    const { as, rs } = bench;
    gateway = await startAppUnderTest({
      caPem: rs.caPem,
      config: {
        upstreams: [
          {
            name: "payments",
            baseUrl: rs.origin,
            tokenUrl: as.tokenUrl,
            allowInsecureHttp: true,
            clientId: as.clientId,
            clientSecret: as.clientSecret,
            scope: as.scope,
            tokenParams: { resource: as.resource },
            dpop: {},
            token: { minRefreshInterval: "0ms", minAgeBeforeInvalidate: "0ms" },
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await gateway?.close();
  });

  const call = async (
    path: string,
    init: { method?: string; body?: string; headers?: Record<string, string> } = {},
  ) => {
    const res = await request(`${gateway.url}${path}`, {
      method: (init.method ?? "GET") as "GET",
      headers: init.headers,
      body: init.body,
    });
    return { status: res.statusCode, text: await res.body.text() };
  };

  it("answers with the nonce both servers demand, then needs no extra round trip", async () => {
    const first = await call("/orders?page=1");
    expect(first.status).toBe(200);
    // The AS asked for its nonce once; the RS too: each answered with one use_dpop_nonce.
    expect(tokenStatuses(bench.as)).toEqual([400, 200]);
    expect(bench.rs.seen.map((s) => s.error ?? s.status)).toEqual(["use_dpop_nonce", 200]);
    const accepted = bench.rs.seen.at(-1)!;
    expect(accepted.scheme).toBe("DPoP");
    expect(accepted.claims?.htu).toBe(`${bench.rs.origin}/orders`);
    expect(accepted.claims?.htm).toBe("GET");

    const seenBefore = bench.rs.seen.length;
    expect((await call("/orders/2")).status).toBe(200);
    expect(bench.rs.seen.slice(seenBefore).map((s) => s.status)).toEqual([200]);
  });

  it("drops the client's own Authorization and DPoP", async () => {
    const seenBefore = bench.rs.seen.length;
    const res = await call("/orders/3", {
      headers: { authorization: "Bearer stolen", dpop: `${PROOF_PREFIX}.forged.proof` },
    });
    expect(res.status).toBe(200);
    const seen = bench.rs.seen.slice(seenBefore);
    expect(seen.map((s) => s.status)).toEqual([200]);
    expect(seen[0]!.proof).not.toContain("forged");
  });

  it("follows a nonce rotation with one retry, POST bodies included", async () => {
    bench.rs.rotateNonce();
    const seenBefore = bench.rs.seen.length;
    const res = await call("/orders", {
      method: "POST",
      body: '{"amount":1}',
      headers: { "content-type": "application/json" },
    });
    expect(res.status).toBe(200);
    const seen = bench.rs.seen.slice(seenBefore);
    expect(seen.map((s) => s.error ?? s.status)).toEqual(["use_dpop_nonce", 200]);
    // A new proof each attempt: the replayed one would have been refused as a jti replay.
    expect(seen[0]!.claims?.jti).not.toBe(seen[1]!.claims?.jti);
    expect(seen[1]!.claims?.htm).toBe("POST");
  });

  it("binds the refreshed token to the same key", async () => {
    const jkts = new Set(bench.rs.seen.filter((s) => s.status === 200).map((s) => s.jkt));
    const tokensBefore = tokenStatuses(bench.as).filter((s) => s === 200).length;
    // 4 s tokens, refreshed at 75–85 % of their life: waited for, since a loaded machine is late.
    await waitFor(
      () => tokenStatuses(bench.as).filter((s) => s === 200).length > tokensBefore,
      "a refreshed token",
      15_000,
    );
    const seenBefore = bench.rs.seen.length;
    expect((await call("/orders/after-refresh")).status).toBe(200);
    const seen = bench.rs.seen.slice(seenBefore).filter((s) => s.status === 200);
    expect(seen).toHaveLength(1);
    expect(jkts.has(seen[0]!.jkt)).toBe(true);
    expect(jkts.size).toBe(1);
  });

  it("never logs a token or a proof", () => {
    const lines = gateway.lines.join("\n");
    expect(lines).not.toContain(PROOF_PREFIX);
    for (const s of bench.rs.seen) if (s.accessToken) expect(lines).not.toContain(s.accessToken);
  });
});
