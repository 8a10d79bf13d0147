import { describe, expect, it } from "vitest";
import { createMetrics } from "../../src/observability/metrics.js";
import { createRequestMetrics, type FinishedRequest } from "../../src/proxy/request-metrics.js";

/** Request metrics are accumulated cheaply, yet every read sees every finished request. */
describe("request metrics", () => {
  const done = (overrides: Partial<FinishedRequest> = {}): FinishedRequest => ({
    upstream: "api",
    routed: true,
    method: "GET",
    status: 200,
    replayed: false,
    errorCode: undefined,
    ...overrides,
  });

  it("counter, histogram and in-flight gauge are exact at every read", async () => {
    const metrics = createMetrics({ collectProcessMetrics: false });
    const rm = createRequestMetrics(metrics);
    rm.started("api");
    rm.started("api");
    expect((await metrics.requestsInFlight.get()).values).toEqual([
      expect.objectContaining({ labels: { upstream: "api" }, value: 2 }),
    ]);
    rm.finished(done(), 3);
    rm.finished(done({ method: "BREW", status: 503 }), 2_000);
    expect((await metrics.requestsInFlight.get()).values[0]!.value).toBe(0);
    const total = await metrics.requestsTotal.get();
    expect(total.values).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          labels: { upstream: "api", method: "GET", status_class: "2xx" },
          value: 1,
        }),
        expect.objectContaining({
          labels: { upstream: "api", method: "OTHER", status_class: "5xx" },
          value: 1,
        }),
      ]),
    );
    const text = await metrics.registry.metrics();
    expect(text).toContain(
      'bearer_proxy_request_duration_seconds_count{upstream="api",method="GET",status_class="2xx"} 1',
    );
    expect(text).toContain(
      'bearer_proxy_request_duration_seconds_sum{upstream="api",method="OTHER",status_class="5xx"} 2',
    );
    expect(text).toContain(
      'bearer_proxy_request_duration_seconds_bucket{le="0.0025",upstream="api",method="OTHER",status_class="5xx"} 0',
    );
  });

  it("reads after reads add only what is new", async () => {
    const metrics = createMetrics({ collectProcessMetrics: false });
    const rm = createRequestMetrics(metrics);
    rm.finished(done({ routed: false, upstream: "none", status: 404 }), 1);
    await metrics.registry.metrics();
    rm.finished(done({ routed: false, upstream: "none", status: 404 }), 1);
    const total = await metrics.requestsTotal.get();
    expect(total.values[0]!.value).toBe(2);
    const histogram = await metrics.requestDurationSeconds.get();
    const count = histogram.values.find((v) => v.metricName?.endsWith("_count"));
    expect(count?.value).toBe(2);
    // Never routed: never in flight.
    expect((await metrics.requestsInFlight.get()).values).toEqual([]);
  });

  it("a thousand durations are all observed", async () => {
    const metrics = createMetrics({ collectProcessMetrics: false });
    const rm = createRequestMetrics(metrics);
    for (let i = 0; i < 1_000; i++) rm.finished(done({ routed: false }), 1);
    const histogram = await metrics.requestDurationSeconds.get();
    const count = histogram.values.find((v) => v.metricName?.endsWith("_count"));
    expect(count?.value).toBe(1_000);
  });

  it("two listeners on one registry add up", async () => {
    const metrics = createMetrics({ collectProcessMetrics: false });
    const a = createRequestMetrics(metrics);
    const b = createRequestMetrics(metrics);
    a.started("one");
    b.started("two");
    a.finished(done({ upstream: "one" }), 1);
    b.finished(done({ upstream: "two" }), 1);
    b.finished(done({ upstream: "two", routed: false }), 1);
    const total = await metrics.requestsTotal.get();
    const byUpstream = (values: { labels: { upstream?: string | number }; value: number }[]) =>
      values.map((v) => [v.labels.upstream, v.value]).sort();
    expect(byUpstream(total.values)).toEqual([
      ["one", 1],
      ["two", 2],
    ]);
    const inFlight = await metrics.requestsInFlight.get();
    expect(byUpstream(inFlight.values)).toEqual([
      ["one", 0],
      ["two", 0],
    ]);
    // Both listeners' requests to "two" land in one histogram series.
    a.finished(done({ upstream: "two" }), 1);
    const histogram = await metrics.requestDurationSeconds.get();
    const counts = histogram.values.filter((v) => v.metricName?.endsWith("_count"));
    expect(byUpstream(counts)).toEqual([
      ["one", 1],
      ["two", 3],
    ]);
  });

  it("replays and errors are counted (client_closed is not an error)", async () => {
    const metrics = createMetrics({ collectProcessMetrics: false });
    const rm = createRequestMetrics(metrics);
    rm.finished(done({ replayed: true }), 1);
    rm.finished(done({ status: 504, errorCode: "upstream_timeout" }), 1);
    rm.finished(done({ status: 499, errorCode: "client_closed" }), 1);
    expect((await metrics.replaysTotal.get()).values[0]!.value).toBe(1);
    expect((await metrics.errorsTotal.get()).values).toEqual([
      expect.objectContaining({ labels: { upstream: "api", code: "upstream_timeout" }, value: 1 }),
    ]);
  });

  it("issue 32: policy refusals are counted by code, but are not errors in the recent rates", async () => {
    const metrics = createMetrics({ collectProcessMetrics: false });
    const rm = createRequestMetrics(metrics);
    const nowMs = 1_000;
    for (const [status, errorCode] of [
      [407, "caller_unauthenticated"],
      [403, "caller_not_allowed"],
      [429, "caller_throttled"],
      [429, "rate_limited"],
    ] as const) {
      rm.finished(done({ status, errorCode }), 1, nowMs);
    }
    const codes = (await metrics.errorsTotal.get()).values.map((v) => v.labels.code).sort();
    expect(codes).toEqual([
      "caller_not_allowed",
      "caller_throttled",
      "caller_unauthenticated",
      "rate_limited",
    ]);
    expect(metrics.requestRates.recent("api", nowMs)).toMatchObject({
      requests15m: 4,
      errors15m: 0,
    });
    // The gateway's own trouble stays an error.
    rm.finished(done({ status: 503, errorCode: "caller_keys_unavailable" }), 1, nowMs);
    rm.finished(done({ status: 429, errorCode: "upstream_rate_limited" }), 1, nowMs);
    expect(metrics.requestRates.recent("api", nowMs).errors15m).toBe(2);
  });
});
