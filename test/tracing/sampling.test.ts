/**
 * Issue #25: the sampler comes from OTEL_TRACES_SAMPLER / _ARG, and a sampled-out request still
 * propagates a traceparent upstream (flags 00), continuing the client's trace when it sent one.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  only,
  parseTraceparent,
  startTracingFixture,
  type TracingFixture,
} from "./tracing-fixture.js";

const TRACE = "0af7651916cd43dd8448eb211c80319c";
const PARENT = "b7ad6b7169203331";

describe("sampling", () => {
  let fx: TracingFixture | undefined;
  afterEach(async () => {
    await fx?.close();
    fx = undefined;
  });

  /** One request with `traceparent` (if any); returns what would be sent upstream. */
  function request(f: TracingFixture, traceparent?: string) {
    const server = f.tracing.startServerSpan({
      headers: traceparent ? { traceparent } : {},
      method: "GET",
    });
    const attempt = server.startClientSpan("GET", "https://api.example", "/x?q=1", "orders");
    const sent = parseTraceparent(attempt.traceparent());
    attempt.end(200);
    server.end(200);
    return { server, sent };
  }

  it("always_off exports nothing but still sends a traceparent with flags 00", async () => {
    fx = await startTracingFixture("http/protobuf", { OTEL_TRACES_SAMPLER: "always_off" });
    const fresh = request(fx);
    expect(fresh.sent.flags).toBe("00");
    expect(fresh.sent.traceId).toBe(fresh.server.traceId);
    expect(fresh.sent.traceId).not.toBe("0".repeat(32));
    expect(fresh.sent.spanId).not.toBe(fresh.server.spanId);

    const continued = request(fx, `00-${TRACE}-${PARENT}-01`);
    expect(continued.sent).toMatchObject({ traceId: TRACE, flags: "00" });
    expect(continued.sent.spanId).not.toBe(PARENT);
    expect(continued.server.traceId).toBe(TRACE);

    expect(await fx.flushed()).toHaveLength(0);
    expect(fx.receiver.exports).toHaveLength(0);
  });

  it("parentbased_traceidratio with ratio 0 follows a sampled parent and drops the rest", async () => {
    fx = await startTracingFixture("http/json", {
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0",
    });
    const sampledParent = request(fx, `00-${TRACE}-${PARENT}-01`);
    expect(sampledParent.sent).toMatchObject({ traceId: TRACE, flags: "01" });

    const unsampledParent = request(fx, `00-${"1".repeat(32)}-${PARENT}-00`);
    expect(unsampledParent.sent).toMatchObject({ traceId: "1".repeat(32), flags: "00" });

    const root = request(fx);
    expect(root.sent.flags).toBe("00");

    const spans = await fx.flushed();
    expect(spans).toHaveLength(2);
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([TRACE]));
    expect(only(spans, "GET", "server").parentSpanId).toBe(PARENT);
    expect(only(spans, "GET", "client").spanId).toBe(sampledParent.sent.spanId);
  });

  it("traceidratio with ratio 0 ignores the parent's decision", async () => {
    fx = await startTracingFixture("http/protobuf", {
      OTEL_TRACES_SAMPLER: "traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0",
    });
    expect(request(fx, `00-${TRACE}-${PARENT}-01`).sent).toMatchObject({
      traceId: TRACE,
      flags: "00",
    });
    expect(await fx.flushed()).toHaveLength(0);
  });

  it("defaults to parentbased_always_on: a root is sampled, an unsampled parent is followed", async () => {
    fx = await startTracingFixture("http/protobuf");
    expect(request(fx).sent.flags).toBe("01");
    expect(request(fx, `00-${TRACE}-${PARENT}-00`).sent.flags).toBe("00");
    expect(await fx.flushed()).toHaveLength(2);
  });
});
