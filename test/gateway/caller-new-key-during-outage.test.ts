import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { JWKS_COOLDOWN_MS } from "../../src/callers/jwks-source.js";
import {
  expectKeysUnavailable,
  useServiceAccountGateway,
} from "../callers/support/service-account-gateway.js";
import {
  adminText,
  callerDenialCounts,
  errorCode,
  es256SigningKey,
  type ServiceAccountSigningKey,
} from "../helpers/callers-fixture.js";

/**
 * Issue 23, through the whole gateway: the cluster starts signing with a new key while the API
 * server is down. The gateway cannot learn the key, which is not the caller's fault: 503
 * `caller_keys_unavailable` with Retry-After and no challenge, and sixteen of them from one
 * address never become 429. Tokens of the key fetched before the outage still pass; once the
 * server is back with the new key the same token does. With the server healthy a key it does
 * not publish is still refused with 407. Only Date is faked (jose's cooldown, the backoff).
 */

const CALLER = "127.0.0.5";
const OTHER = "127.0.0.6";

describe("a service-account token signed by a key published during an API-server outage", () => {
  const bench = useServiceAccountGateway();
  let k1: ServiceAccountSigningKey;
  let k2: ServiceAccountSigningKey;
  let byK2: string;
  const jwksFetches = () => bench.jwks.requests.length;
  const advance = (ms: number) => vi.setSystemTime(Date.now() + ms);

  beforeAll(async () => {
    [k1, k2] = await Promise.all([es256SigningKey("k1"), es256SigningKey("k2")]);
    bench.jwks.publish(k1);
    vi.useFakeTimers({ toFake: ["Date"] });
  });
  afterAll(() => {
    vi.useRealTimers();
  });

  it("with the server healthy, a kid it does not publish: 407 caller_unauthenticated", async () => {
    const res = await bench.get(await bench.token(k1.privateKey), OTHER);
    expect(res.status, res.text).toBe(200);
    advance(JWKS_COOLDOWN_MS + 1_000);
    const unknown = await bench.get(await bench.token(k2.privateKey, { kid: "k2" }), OTHER);
    expect(unknown.status, unknown.text).toBe(407);
    expect(errorCode(unknown.text)).toBe("caller_unauthenticated");
    expect(unknown.headers["proxy-authenticate"]).toBeDefined();
    expect(jwksFetches()).toBe(2);
  });

  it("the server fails and the cluster signs with k2: 503 caller_keys_unavailable, Retry-After, no challenge", async () => {
    bench.jwks.failure = { status: 500, body: "etcdserver: request timed out" };
    bench.jwks.publish(k1, k2);
    advance(JWKS_COOLDOWN_MS + 1_000);
    byK2 = await bench.token(k2.privateKey, { kid: "k2" });
    const res = await bench.get(byK2, CALLER);
    expectKeysUnavailable(
      res,
      "the service-account token's key (kid) is not among the cluster's keys last fetched, and they cannot be refreshed now; retry later",
    );
    expect(jwksFetches()).toBe(3);
  });

  it("fifteen more from the same address: all 503, none throttled; k1 still passes", async () => {
    for (let i = 0; i < 15; i++) {
      const res = await bench.get(byK2, CALLER);
      expect(res.status, `request ${i + 2}: ${res.text}`).toBe(503);
      expect(errorCode(res.text)).toBe("caller_keys_unavailable");
    }
    const counts = callerDenialCounts(await adminText(bench.gateway.adminUrl, "/metrics"));
    expect(counts).toEqual({ "billing/invalid_credential": 1, "billing/keys_unavailable": 16 });
    // Within jose's cooldown: nothing fetched for them.
    expect(jwksFetches()).toBe(3);
    const res = await bench.get(await bench.token(k1.privateKey), CALLER);
    expect(res.status, res.text).toBe(200);
  });

  it("the server is back with k2: after the cooldown the same token is admitted from the same address", async () => {
    bench.jwks.failure = undefined;
    advance(JWKS_COOLDOWN_MS + 1_000);
    const res = await bench.get(byK2, CALLER);
    expect(res.status, res.text).toBe(200);
    expect(JSON.parse(res.text)).toMatchObject({ method: "GET", url: "/echo" });
    expect(jwksFetches()).toBe(4);
  });

  it("no service-account token in logs, answers, /status or /metrics", async () => {
    await bench.expectNothingLeaked();
  });
});
