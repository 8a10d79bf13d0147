/**
 * Issue #25: the upstream receives our traceparent (the attempt as parent); each attempt
 * overwrites the last one's without moving any other field (the Authorization slot is an
 * index into the list); with tracing off the list is left as the client sent it.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { NOOP_TRACING, writeTraceContext } from "../../src/observability/tracing.js";
import { parseTraceparent, startTracingFixture, type TracingFixture } from "./tracing-fixture.js";

const CLIENT_PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

describe("writeTraceContext", () => {
  let fx: TracingFixture;
  beforeEach(async () => {
    fx = await startTracingFixture("http/protobuf");
  });
  afterEach(async () => {
    await fx.close();
  });

  it("appends on the first attempt and overwrites on the replay", () => {
    const server = fx.tracing.startServerSpan({
      headers: { traceparent: CLIENT_PARENT, tracestate: "v=1" },
      method: "GET",
    });
    // As built for the upstream: the client's trace fields left out, Authorization at index 3.
    const headers = ["accept", "*/*", "authorization", "Bearer x"];
    const first = server.startClientSpan("GET", "https://api.example", "/", "u");
    writeTraceContext(headers, first);
    expect(headers).toEqual([
      "accept",
      "*/*",
      "authorization",
      "Bearer x",
      "traceparent",
      first.traceparent(),
      "tracestate",
      "v=1",
    ]);
    const replay = server.startClientSpan("GET", "https://api.example", "/", "u", 1);
    headers[3] = "Bearer y";
    writeTraceContext(headers, replay);
    expect(headers).toHaveLength(8);
    expect(headers[3]).toBe("Bearer y");
    expect(parseTraceparent(headers[5])).toMatchObject({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: parseTraceparent(replay.traceparent()).spanId,
    });
    expect(parseTraceparent(headers[5]).spanId).not.toBe(
      parseTraceparent(first.traceparent()).spanId,
    );
    first.end(401);
    replay.end(200);
    server.end(200);
  });

  it("replaces a field already in the list, whatever its case", () => {
    const server = fx.tracing.startServerSpan({ headers: {}, method: "GET" });
    const attempt = server.startClientSpan("GET", "https://api.example", "/", "u");
    const headers = ["TraceParent", CLIENT_PARENT, "authorization", "Bearer x"];
    writeTraceContext(headers, attempt);
    expect(headers).toEqual(["TraceParent", attempt.traceparent(), "authorization", "Bearer x"]);
    attempt.end(200);
    server.end(200);
  });

  it("leaves the client's fields alone when tracing is off", () => {
    const span = NOOP_TRACING.startServerSpan({ headers: {} }).startClientSpan("GET", "", "", "");
    const headers = ["traceparent", CLIENT_PARENT, "tracestate", "v=1"];
    writeTraceContext(headers, span);
    expect(headers).toEqual(["traceparent", CLIENT_PARENT, "tracestate", "v=1"]);
  });
});
