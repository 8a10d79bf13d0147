import { beforeAll, describe, expect, it } from "vitest";
import { useServiceAccountGateway } from "../callers/support/service-account-gateway.js";
import {
  errorCode,
  es256SigningKey,
  type ServiceAccountPrivateKey,
  type ServiceAccountSigningKey,
} from "../helpers/callers-fixture.js";

/**
 * Issue 23: service-account tokens verified against the cluster's keys fetched from `jwksUri`
 * over real TLS, trusted through `caFile` (a CA of its own, unknown to the upstreams). A good
 * token passes; an expired one, one for another audience, and one signed by a key the server
 * does not publish yet are refused with 407 — the unknown `kid` costing at most one refetch, so
 * a flood of made-up `kid`s is no flood of fetches (jose's cooldown, 30 s, is too long to wait
 * out here).
 */

describe("service-account tokens with a remote JWKS over TLS", () => {
  const bench = useServiceAccountGateway();
  let k1: ServiceAccountPrivateKey;
  let k2: ServiceAccountPrivateKey;
  /** k1 and k2 with their public halves, as the JWKS server publishes them. */
  let pair1: ServiceAccountSigningKey;
  let pair2: ServiceAccountSigningKey;
  const jwksFetches = () => bench.jwks.requests.length;

  const token = (
    key: ServiceAccountPrivateKey,
    kid: string,
    options: { audience?: string; expiresAt?: string | number } = {},
  ) => bench.token(key, { kid, ...options });
  const get = (jwt: string, localAddress?: string) => bench.get(jwt, localAddress);

  beforeAll(async () => {
    [pair1, pair2] = await Promise.all([es256SigningKey("k1"), es256SigningKey("k2")]);
    [k1, k2] = [pair1.privateKey, pair2.privateKey];
    bench.jwks.publish(pair1);
  });

  it("a good token passes: the keys are fetched once over TLS trusted through caFile", async () => {
    const jwt = await token(k1, "k1");
    const res = await get(jwt);
    expect(res.status, res.text).toBe(200);
    expect(jwksFetches()).toBe(1);
    expect((await get(jwt)).status).toBe(200);
    expect(jwksFetches()).toBe(1);
  });

  it("an expired token: 407, saying so", async () => {
    const res = await get(await token(k1, "k1", { expiresAt: Math.floor(Date.now() / 1000) - 60 }));
    expect(res.status).toBe(407);
    expect(errorCode(res.text)).toBe("caller_unauthenticated");
    expect(res.text).toContain("expired");
  });

  it("a token for another audience: 407, saying so", async () => {
    const res = await get(await token(k1, "k1", { audience: "some-other-service" }));
    expect(res.status).toBe(407);
    expect(res.text).toContain("audience is not one of [bearer-proxy]");
  });

  it("a key the server does not publish yet: 407, at most one refetch", async () => {
    const fetchesBefore = jwksFetches();
    const res = await get(await token(k2, "k2"));
    expect(res.status).toBe(407);
    expect(res.text).toContain("signed by a key the cluster does not publish");
    expect(jwksFetches() - fetchesBefore).toBeLessThanOrEqual(1);
  });

  it("made-up kids (and k2, now published) within the cooldown cause no further fetch", async () => {
    bench.jwks.publish(pair1, pair2);
    const fetchesBefore = jwksFetches();
    for (let i = 0; i < 5; i++) {
      expect((await get(await token(k2, `made-up-${i}`), "127.0.0.9")).status).toBe(407);
    }
    // Within jose's 30 s cooldown even the real new key waits for the next allowed refetch.
    expect((await get(await token(k2, "k2"))).status).toBe(407);
    expect(jwksFetches()).toBe(fetchesBefore);
    expect((await get(await token(k1, "k1"))).status).toBe(200);
  });

  it("no service-account JWT in logs, error bodies, /status or /metrics", async () => {
    expect(bench.tokens.length).toBeGreaterThan(8);
    await bench.expectNothingLeaked();
  });
});
