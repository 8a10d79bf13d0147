import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { JWKS_RETRY_AFTER_FAILURE_MS } from "../../src/callers/jwks-source.js";
import {
  expectKeysUnavailable,
  useServiceAccountGateway,
} from "../callers/support/service-account-gateway.js";
import { logsMatching } from "../helpers/app-under-test.js";
import {
  adminText,
  callerDenialCounts,
  errorCode,
  es256SigningKey,
  type ServiceAccountSigningKey,
} from "../helpers/callers-fixture.js";

/**
 * When the cluster's signing keys cannot be loaded at all (here: a JWKS server that has only
 * ever answered 500, as an API server mid-upgrade does), a service-account caller is not at
 * fault. It gets 503 `caller_keys_unavailable` with `Retry-After`, not a 407 (which makes git
 * ask for other credentials), and the refusal counts toward no throttle: fifteen of them from
 * one address never become 429 `caller_throttled`, and once the keys are back (after the
 * fetch backoff) the same address is admitted at once.
 */

const CALLER = "127.0.0.4";

describe("service-account callers while the cluster's keys are unavailable", () => {
  const bench = useServiceAccountGateway();
  let key: ServiceAccountSigningKey;
  const jwksFetches = () => bench.jwks.requests.length;

  const call = async () => bench.get(await bench.token(key.privateKey), CALLER);

  beforeAll(async () => {
    key = await es256SigningKey("k1");
    bench.jwks.publish(key);
    // How an API server mid-upgrade answers, until a test serves the keys.
    bench.jwks.failure = { status: 500, body: "etcdserver: request timed out" };
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("a JWKS server that never served keys: 503 caller_keys_unavailable with Retry-After, no challenge", async () => {
    const res = await call();
    expectKeysUnavailable(
      res,
      "the cluster's service-account signing keys could not be loaded; retry later",
    );
    expect(jwksFetches()).toBe(1);
    expect(logsMatching(bench.gateway.records, "signing keys could not be loaded")).toEqual([
      expect.objectContaining({
        level: "warn",
        err: expect.objectContaining({
          message: "Expected 200 OK from the JSON Web Key Set HTTP response",
        }),
      }),
    ]);
  });

  it("fifteen more from the same address: all 503, none throttled, each counted as keys_unavailable", async () => {
    for (let i = 0; i < 15; i++) {
      const res = await call();
      expect(res.status, `request ${i + 2}: ${res.text}`).toBe(503);
      expect(errorCode(res.text)).toBe("caller_keys_unavailable");
    }
    const counts = callerDenialCounts(await adminText(bench.gateway.adminUrl, "/metrics"));
    expect(counts).toEqual({ "billing/keys_unavailable": 16 });
    const status = JSON.parse(await adminText(bench.gateway.adminUrl, "/status?format=json")) as {
      callerDenials?: { reason: string; caller: string }[];
    };
    expect(status.callerDenials?.[0]).toMatchObject({
      reason: "keys_unavailable",
      caller: `addr:${CALLER}`,
    });
    // One warning for all of them (at most one a minute).
    expect(logsMatching(bench.gateway.records, "signing keys could not be loaded")).toHaveLength(1);
  });

  it("the keys are back: after the fetch backoff the same address is admitted", async () => {
    bench.jwks.failure = undefined;
    // Only Date moves (the backoff's and jose's clock); the throttle runs on the monotonic
    // clock, so a failure counted above would still block this address now.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + JWKS_RETRY_AFTER_FAILURE_MS + 1_000);
    const fetchesBefore = jwksFetches();
    const res = await call();
    expect(res.status, res.text).toBe(200);
    expect(jwksFetches()).toBe(fetchesBefore + 1);
    expect(JSON.parse(res.text)).toMatchObject({ method: "GET", url: "/echo" });
  });

  it("no service-account token in logs, answers, /status or /metrics", async () => {
    expect(bench.tokens).toHaveLength(17);
    await bench.expectNothingLeaked();
  });
});
