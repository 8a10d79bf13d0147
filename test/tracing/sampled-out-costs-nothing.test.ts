/**
 * Issue #33: a request the sampler leaves out must cost next to nothing, since production runs
 * at 10 % or less. The SDK is not asked to start a span for it (the sampler is asked directly,
 * with ids drawn first), yet what it propagates is what the SDK's non-recording spans sent;
 * and a recorded request is exported under exactly the ids the sampler was asked about. A
 * request without a parent is decided from its trace id's bytes, without asking the sampler:
 * always the answer the SDK's sampler gives for that trace id.
 */
import { ROOT_CONTEXT } from "@opentelemetry/api";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  type Sampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Tracing } from "../../src/observability/tracing.js";
import {
  only,
  parseTraceparent,
  startTracingFixture,
  type TracingFixture,
} from "./tracing-fixture.js";

const TRACE = "0af7651916cd43dd8448eb211c80319c";
const PARENT = "b7ad6b7169203331";

/** The SDK tracer behind `tracing` (SdkTracing keeps it as `tracer`). */
function sdkTracer(tracing: Tracing): { startSpan: (...args: unknown[]) => unknown } {
  return (tracing as unknown as { tracer: { startSpan: (...args: unknown[]) => unknown } }).tracer;
}

describe("a sampled-out request", () => {
  let fx: TracingFixture | undefined;
  afterEach(async () => {
    await fx?.close();
    fx = undefined;
  });

  it("starts no SDK span, and still sends its trace upstream with a fresh id per attempt", async () => {
    fx = await startTracingFixture("http/protobuf", {
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0",
    });
    const startSpan = vi.spyOn(sdkTracer(fx.tracing), "startSpan");

    const server = fx.tracing.startServerSpan({
      headers: { traceparent: `00-${TRACE}-${PARENT}-00`, tracestate: "vendor=abc,other=1" },
      method: "GET",
      httpVersion: "1.1",
    });
    server.setUpstream("orders");
    server.setPath("/x");
    const first = server.startClientSpan("GET", "https://api.example", "/x?q=1", "orders");
    const firstSent = parseTraceparent(first.traceparent());
    expect(first.tracestate()).toBe("vendor=abc,other=1");
    first.end(401, undefined, "1.1");
    const replay = server.startClientSpan("GET", "https://api.example", "/x?q=1", "orders", 1);
    const replaySent = parseTraceparent(replay.traceparent());
    replay.end(200, undefined, "1.1");
    server.end(200);

    expect(server.traceId).toBe(TRACE);
    expect(server.spanId).toMatch(/^[0-9a-f]{16}$/);
    for (const sent of [firstSent, replaySent]) {
      expect(sent).toMatchObject({ traceId: TRACE, flags: "00" });
      expect(sent.spanId).toMatch(/^[0-9a-f]{16}$/);
      expect([PARENT, server.spanId, "0".repeat(16)]).not.toContain(sent.spanId);
    }
    expect(replaySent.spanId).not.toBe(firstSent.spanId);

    const root = fx.tracing.startServerSpan({ headers: {}, method: "GET" });
    const rootSent = parseTraceparent(
      root.startClientSpan("GET", "https://api.example", "/", "orders").traceparent(),
    );
    expect(rootSent).toMatchObject({ traceId: root.traceId, flags: "00" });
    expect(root.traceId).toMatch(/^[0-9a-f]{32}$/);

    expect(startSpan).not.toHaveBeenCalled();
    expect(await fx.flushed()).toEqual([]);
  });

  it("keeps its trace for a token fetch it waits on: the fetch is not recorded either", async () => {
    // Ratio 1 samples every root: a fetch that lost its parent would start a recorded trace.
    fx = await startTracingFixture("http/protobuf", {
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "1",
    });
    const server = fx.tracing.startServerSpan({
      headers: { traceparent: `00-${TRACE}-${PARENT}-00` },
      method: "GET",
    });
    const wait = server.startTokenSpan("orders");
    fx.tracing.startTokenFetchSpan("orders", { parent: wait }).end();
    wait.end();
    server.end(200);
    expect(await fx.flushed()).toEqual([]);
  });
});

describe("a request without a parent", () => {
  let fx: TracingFixture | undefined;
  afterEach(async () => {
    await fx?.close();
    fx = undefined;
  });

  const cases: [string, string | undefined, Sampler][] = [
    ["parentbased_always_on", undefined, new AlwaysOnSampler()],
    ["always_on", undefined, new AlwaysOnSampler()],
    ["always_off", undefined, new AlwaysOffSampler()],
    ["parentbased_always_off", undefined, new AlwaysOffSampler()],
    ["traceidratio", "0.1", new TraceIdRatioBasedSampler(0.1)],
    ["parentbased_traceidratio", "0.1", new TraceIdRatioBasedSampler(0.1)],
    ["parentbased_traceidratio", "0.9", new TraceIdRatioBasedSampler(0.9)],
    ["parentbased_traceidratio", "0.0001", new TraceIdRatioBasedSampler(0.0001)],
    ["parentbased_traceidratio", "1", new TraceIdRatioBasedSampler(1)],
    ["traceidratio", "0", new TraceIdRatioBasedSampler(0)],
  ];

  it.each(cases)(
    "%s %s: recorded exactly when the SDK's sampler samples its trace id",
    async (name, arg, reference) => {
      fx = await startTracingFixture("http/protobuf", {
        OTEL_TRACES_SAMPLER: name,
        ...(arg === undefined ? {} : { OTEL_TRACES_SAMPLER_ARG: arg }),
      });
      const startSpan = vi.spyOn(sdkTracer(fx.tracing), "startSpan");
      let recorded = 0;
      for (let i = 0; i < 3000; i++) {
        const server = fx.tracing.startServerSpan({ headers: {}, method: "GET" });
        const expected = reference.shouldSample(ROOT_CONTEXT, server.traceId, "GET", 1, {}, []);
        expect(server.recorded).toBe(expected.decision === SamplingDecision.RECORD_AND_SAMPLED);
        if (server.recorded) recorded++;
        server.end(200);
      }
      const ratio = arg === undefined ? (name.endsWith("always_off") ? 0 : 1) : Number(arg);
      // 3,000 draws: within 5 standard deviations of the ratio (exact at 0 and 1).
      const spread = 5 * Math.sqrt(3000 * ratio * (1 - ratio));
      expect(Math.abs(recorded - 3000 * ratio)).toBeLessThanOrEqual(spread);
      expect(startSpan).not.toHaveBeenCalled();
    },
  );
});

describe("a sampled request", () => {
  let fx: TracingFixture | undefined;
  afterEach(async () => {
    await fx?.close();
    fx = undefined;
  });

  it("is decided by the SDK's ratio sampler and exported under the ids it was decided on", async () => {
    fx = await startTracingFixture("http/protobuf", {
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.5",
    });
    const reference = new TraceIdRatioBasedSampler(0.5);
    const sampled: { traceId: string; serverSpanId: string; clientSpanId: string }[] = [];
    let unsampled = 0;
    for (let i = 0; i < 1000; i++) {
      const server = fx.tracing.startServerSpan({ headers: {}, method: "GET" });
      const attempt = server.startClientSpan("GET", "https://api.example", "/x", "orders");
      const sent = parseTraceparent(attempt.traceparent());
      attempt.end(200, undefined, "1.1");
      server.end(200);
      const expected = reference.shouldSample(undefined as never, server.traceId).decision;
      expect(sent.flags).toBe(expected === SamplingDecision.RECORD_AND_SAMPLED ? "01" : "00");
      if (sent.flags === "01") {
        sampled.push({
          traceId: server.traceId,
          serverSpanId: server.spanId,
          clientSpanId: sent.spanId,
        });
      } else {
        unsampled++;
      }
    }
    // 1,000 draws at 0.5: 500 ± 16 each. Had the SDK started a recorded request under ids of
    // its own, it would have asked the sampler about another trace id, and kept ~0.5 × 0.5.
    expect(sampled.length).toBeGreaterThan(400);
    expect(unsampled).toBeGreaterThan(400);

    const spans = await fx.flushed();
    expect(spans).toHaveLength(2 * sampled.length);
    for (const request of sampled) {
      const ofTrace = spans.filter((s) => s.traceId === request.traceId);
      const server = only(ofTrace, "GET", "server");
      expect(server.spanId).toBe(request.serverSpanId);
      const client = only(ofTrace, "GET", "client");
      expect(client.spanId).toBe(request.clientSpanId);
      expect(client.parentSpanId).toBe(request.serverSpanId);
    }
  });
});
