/**
 * Issue #25: a token fetch a request caused is in the request's trace; a background refresh is
 * a trace of its own, which a request waiting on it links to.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { NOOP_TRACING } from "../../src/observability/tracing.js";
import { only, startTracingFixture, type TracingFixture } from "./tracing-fixture.js";

describe("token fetch spans", () => {
  let fx: TracingFixture;
  beforeEach(async () => {
    fx = await startTracingFixture("http/json");
  });
  afterEach(async () => {
    await fx.close();
  });

  it("gives a background refresh its own trace, linked from the request that waited on it", async () => {
    const { tracing } = fx;
    const refresh = tracing.startTokenFetchSpan("orders");
    const server = tracing.startServerSpan({ headers: {}, method: "GET" });
    const wait = server.startTokenSpan("orders");
    wait.addLink(refresh);
    // A span from elsewhere (tracing off) is ignored, not an error.
    wait.addLink(NOOP_TRACING.startTokenFetchSpan("orders"));
    refresh.end();
    wait.end();
    server.end(200);

    const spans = await fx.flushed();
    const fetchSpan = only(spans, "token fetch");
    const waitSpan = only(spans, "token wait");
    expect(fetchSpan.parentSpanId).toBe("");
    expect(fetchSpan.traceId).not.toBe(server.traceId);
    expect(fetchSpan.attributes).toEqual({ "bearer_proxy.upstream": "orders" });
    expect(waitSpan).toMatchObject({ traceId: server.traceId, parentSpanId: server.spanId });
    expect(waitSpan.links).toEqual([
      { traceId: fetchSpan.traceId, spanId: fetchSpan.spanId, attributes: {} },
    ]);
  });

  it("puts a fetch caused by a request directly under its server span when given it", async () => {
    const server = fx.tracing.startServerSpan({ headers: {}, method: "GET" });
    fx.tracing.startTokenFetchSpan("orders", { parent: server }).end();
    server.end(200);
    const spans = await fx.flushed();
    expect(only(spans, "token fetch")).toMatchObject({
      traceId: server.traceId,
      parentSpanId: server.spanId,
    });
  });
});
