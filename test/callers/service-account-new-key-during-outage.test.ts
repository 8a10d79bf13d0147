import { generateKeyPair, SignJWT } from "jose";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { withLastGoodKeys } from "../../src/callers/jwks-fetch.js";
import { createJwksSource, JWKS_COOLDOWN_MS } from "../../src/callers/jwks-source.js";
import { createServiceAccountVerifier } from "../../src/callers/service-account.js";
import { AUDIENCE, capturingLogger, ISSUER, serviceAccountToken, signingKeys } from "./helpers.js";
import { useJwksBench } from "./support/jwks-server.js";

/**
 * Issue 23: a token signed by a key the cluster first published during an API-server outage.
 * jose refetches for its unknown `kid`, the refresh fails, the kept keys do not hold it: the
 * caller did nothing wrong, we could not learn the key. That is `keys_unavailable` (503, not
 * counted toward the throttle), not `invalid_token` (407, counted); once the server is back
 * and publishes the key the same token verifies. With a healthy server an unknown kid is still
 * `invalid_token`, and so is a token whose header no cluster writes (no kid). Real TLS
 * sockets; only Date is faked, to pass jose's cooldown and the fetch backoff.
 */

const bench = useJwksBench();
const fetches = () => bench.jwks.requests.length;
/** k1 is published from the start; k2 is the key the cluster adds during the outage. */
const [k1, k2] = await signingKeys("k1", "k2");
const advance = (ms: number) => vi.setSystemTime(Date.now() + ms);
const ANSWER_500 = { status: 500, body: "etcdserver: leader changed" };
const UNAVAILABLE = {
  ok: false,
  reason: "keys_unavailable",
  message:
    "the service-account token's key (kid) is not among the cluster's keys last fetched, and they cannot be refreshed now",
};
const NOT_PUBLISHED = {
  ok: false,
  reason: "invalid_token",
  message: "the service-account token is signed by a key the cluster does not publish",
};

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["Date"] });
});

describe("a token signed by a key published during a JWKS outage", () => {
  it("is keys_unavailable while the refresh fails, and verifies once the server publishes the key", async () => {
    bench.jwks.publish(k1);
    const { logger, records } = capturingLogger();
    const verifier = createServiceAccountVerifier(bench.config(), {
      logger,
      extraCaCertsFile: undefined,
    });
    try {
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(fetches()).toBe(1);

      // The API server goes down; meanwhile the cluster starts signing with k2.
      bench.jwks.failure = ANSWER_500;
      bench.jwks.publish(k1, k2);
      advance(JWKS_COOLDOWN_MS + 1_000);
      const byK2 = await serviceAccountToken(k2);
      expect(await verifier.verify(byK2)).toEqual(UNAVAILABLE);
      expect(fetches()).toBe(2);
      expect(records.filter((r) => r.level === "warn").at(-1)).toMatchObject({
        msg: "callers.kubernetes: the cluster's signing keys could not be loaded",
        err: {
          name: "JWKSNoMatchingKey",
          message:
            "the token names a key (kid) that the keys kept through the failed JWKS refresh do not hold",
        },
        refusedCallers: 1,
      });

      // Within jose's cooldown nothing is fetched, and the answer stays the same; k1 still
      // verifies with the kept keys.
      expect(await verifier.verify(byK2)).toEqual(UNAVAILABLE);
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(fetches()).toBe(2);

      // A header no API server writes (no kid, for a key type the cluster does not use) is the
      // token's fault, outage or not.
      const { privateKey } = await generateKeyPair("ES256");
      const noKid = await new SignJWT({ sub: "system:serviceaccount:payments:billing-client" })
        .setProtectedHeader({ alg: "ES256" })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setExpirationTime("10m")
        .sign(privateKey);
      expect(await verifier.verify(noKid)).toEqual(NOT_PUBLISHED);

      // The server is back with k2: after jose's cooldown (counted from the kept keys it was
      // given) the same token brings a fetch and verifies.
      bench.jwks.failure = undefined;
      advance(JWKS_COOLDOWN_MS + 1_000);
      expect(await verifier.verify(byK2)).toMatchObject({
        ok: true,
        caller: { kind: "serviceAccount", namespace: "payments", name: "billing-client" },
      });
      expect(fetches()).toBe(3);
    } finally {
      await verifier.close();
    }
  });

  it("with a healthy server an unknown kid is still invalid_token", async () => {
    bench.jwks.publish(k1);
    const source = createJwksSource(bench.config(), { extraCaCertsFile: undefined });
    const verifier = createServiceAccountVerifier(bench.config(), { keys: source });
    try {
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      // After the cooldown jose refetches for k2; the server answers, without k2.
      advance(JWKS_COOLDOWN_MS + 1_000);
      expect(await verifier.verify(await serviceAccountToken(k2))).toEqual(NOT_PUBLISHED);
      expect(fetches()).toBe(2);
      // Within the cooldown, no fetch: the same answer.
      expect(await verifier.verify(await serviceAccountToken(k2))).toEqual(NOT_PUBLISHED);
      expect(fetches()).toBe(2);
      expect(source.lastRefreshFailed()).toBe(false);
    } finally {
      await source.close();
    }
  });
});

describe("withLastGoodKeys: lastRefreshFailed()", () => {
  const options = () => ({
    method: "GET" as const,
    redirect: "manual" as const,
    headers: new Headers(),
    signal: AbortSignal.timeout(5_000),
  });
  const ok = () => new Response('{"keys":[]}', { status: 200 });
  let answers: (() => Response)[];
  const fetchJwks = withLastGoodKeys(async () => {
    const next = answers.shift();
    if (next === undefined) throw new Error("connection refused");
    return next();
  });

  afterEach(() => {
    expect(answers).toEqual([]);
  });

  it("is true from a failed refresh (kept keys answered, or an error) until one succeeds", async () => {
    answers = [ok, () => new Response("", { status: 500 })];
    expect(fetchJwks.lastRefreshFailed()).toBe(false);
    expect((await fetchJwks("https://jwks.test/", options())).status).toBe(200);
    expect(fetchJwks.lastRefreshFailed()).toBe(false);
    // A 500: the kept keys answer as a 200, and the refresh counts as failed.
    expect((await fetchJwks("https://jwks.test/", options())).status).toBe(200);
    expect(fetchJwks.lastRefreshFailed()).toBe(true);
    // An error (as the backoff below would throw): still failed.
    expect((await fetchJwks("https://jwks.test/", options())).status).toBe(200);
    expect(fetchJwks.lastRefreshFailed()).toBe(true);
    answers = [ok];
    await fetchJwks("https://jwks.test/", options());
    expect(fetchJwks.lastRefreshFailed()).toBe(false);
  });
});
