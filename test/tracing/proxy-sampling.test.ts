/**
 * Issue #25 end to end: sampling through the real proxy. A sampled-out request exports nothing
 * yet still sends the upstream a traceparent (flags 00, the trace kept) so the trace doesn't
 * break in two; `parentbased_traceidratio` follows a sampled parent even at ratio 0.
 */
import { request } from "undici";
import { describe, expect, it } from "vitest";
import type { EchoResponse } from "../../src/emulator/index.js";
import type { TracingEnv } from "../../src/observability/tracing.js";
import { echoedHeader, useTracedProxyBench } from "./proxy-fixture.js";
import { only, parseTraceparent } from "./tracing-fixture.js";

const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";

describe("sampling through the proxy", () => {
  const bench = useTracedProxyBench();

  const start = async (env: TracingEnv) => {
    bench.proxy = await bench.start({
      env,
      upstreams: [{ name: "sheets", baseUrl: bench.emulator.url }],
    });
    return bench.proxy;
  };

  /** GET through the proxy; the traceparent the upstream received. */
  const upstreamTraceparent = async (headers: Record<string, string> = {}) => {
    const response = await request(`${bench.proxy!.url}/echo/sampled`, { headers });
    expect(response.statusCode).toBe(200);
    return parseTraceparent(
      echoedHeader((await response.body.json()) as EchoResponse, "traceparent"),
    );
  };

  it("always_off: nothing exported, the upstream still gets the trace with flags 00", async () => {
    await start({ OTEL_TRACES_SAMPLER: "always_off" });
    const continued = await upstreamTraceparent({
      traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
    });
    expect(continued).toMatchObject({ traceId: CLIENT_TRACE, flags: "00" });
    // Our own (unrecorded) attempt is the parent, not the client's span.
    expect(continued.spanId).not.toBe(CLIENT_SPAN);
    expect(continued.spanId).not.toBe("0".repeat(16));

    const started = await upstreamTraceparent();
    expect(started.flags).toBe("00");
    expect(started.traceId).not.toBe(CLIENT_TRACE);
    expect(started.traceId).not.toBe("0".repeat(32));

    expect(await bench.proxy!.flushed()).toEqual([]);
    // The access line still names the trace, so the upstream's own logs can be joined.
    expect(bench.proxy!.accessLines().map((line) => line.trace_id)).toEqual([
      CLIENT_TRACE,
      started.traceId,
    ]);
  });

  it("parentbased_traceidratio at 0: a sampled parent is followed, a new trace is not sampled", async () => {
    await start({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0" });
    const followed = await upstreamTraceparent({
      traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
    });
    expect(followed).toMatchObject({ traceId: CLIENT_TRACE, flags: "01" });

    const unsampledParent = "0af7651916cd43dd8448eb211c80319c";
    const notFollowed = await upstreamTraceparent({
      traceparent: `00-${unsampledParent}-b7ad6b7169203331-00`,
    });
    expect(notFollowed).toMatchObject({ traceId: unsampledParent, flags: "00" });

    const root = await upstreamTraceparent();
    expect(root.flags).toBe("00");

    const spans = await bench.proxy!.flushed();
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([CLIENT_TRACE]));
    const server = only(spans, "GET", "server");
    expect(server.parentSpanId).toBe(CLIENT_SPAN);
    expect(only(spans, "GET", "client").spanId).toBe(followed.spanId);
  });
});
