/**
 * Issue #25: one SERVER span per request continuing the client's traceparent, one CLIENT span
 * per upstream attempt (the 401 replay is a second one) as its children, the token wait in the
 * request's trace, and the traceparent sent upstream naming the attempt — over both OTLP/HTTP
 * encodings, through a real receiver.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  only,
  PROTOCOLS,
  parseTraceparent,
  startTracingFixture,
  type TracingFixture,
} from "./tracing-fixture.js";

const INCOMING_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const INCOMING_SPAN = "00f067aa0ba902b7";

describe.each(PROTOCOLS)("span tree over %s", (protocol) => {
  let fx: TracingFixture;
  beforeEach(async () => {
    fx = await startTracingFixture(protocol);
  });
  afterEach(async () => {
    await fx.close();
  });

  it("continues the client's trace: server → token wait → token fetch, server → two attempts", async () => {
    const { tracing } = fx;
    const server = tracing.startServerSpan({
      headers: {
        traceparent: `00-${INCOMING_TRACE}-${INCOMING_SPAN}-01`,
        tracestate: "vendor=abc",
        host: "proxy.local",
      },
      method: "GET",
      httpVersion: "1.1",
    });
    expect(server.traceId).toBe(INCOMING_TRACE);
    expect(server.spanId).toMatch(/^[0-9a-f]{16}$/);
    server.setUpstream("orders");
    server.setPath("/v1/orders/42");

    const wait = server.startTokenSpan("orders");
    const fetch = tracing.startTokenFetchSpan("orders", {
      parent: wait,
      tokenUrl: "https://idp.example.com/oauth2/token",
    });
    fetch.end();
    wait.end();

    const first = server.startClientSpan(
      "GET",
      "https://api.example.com:8443",
      "/base/v1/orders/42?page=2&sig=abc",
      "orders",
    );
    const firstParent = parseTraceparent(first.traceparent());
    expect(first.tracestate()).toBe("vendor=abc");
    first.end(401, undefined, "1.1");
    const replay = server.startClientSpan(
      "GET",
      "https://api.example.com:8443",
      "/base/v1/orders/42?page=2&sig=abc",
      "orders",
      1,
    );
    const replayParent = parseTraceparent(replay.traceparent());
    replay.end(200, undefined, "1.1");
    server.end(200);

    const spans = await fx.flushed();
    expect(spans).toHaveLength(5);
    expect(fx.receiver.exports.map((e) => e.contentType)).toEqual([
      protocol === "http/json" ? "application/json" : "application/x-protobuf",
    ]);
    const serverSpan = only(spans, "GET", "server");
    expect(serverSpan).toMatchObject({
      traceId: INCOMING_TRACE,
      spanId: server.spanId,
      parentSpanId: INCOMING_SPAN,
      traceState: "vendor=abc",
      status: { code: 0 },
    });
    expect(serverSpan.attributes).toEqual({
      "http.request.method": "GET",
      "url.scheme": "http",
      "url.path": "/v1/orders/42",
      "network.protocol.version": "1.1",
      "bearer_proxy.upstream": "orders",
      "http.response.status_code": 200,
    });

    const clients = spans.filter((s) => s.kind === "client" && s.name === "GET");
    expect(clients).toHaveLength(2);
    const [attempt1, attempt2] = [
      clients.find((s) => s.attributes["http.request.resend_count"] === undefined)!,
      clients.find((s) => s.attributes["http.request.resend_count"] === 1)!,
    ];
    for (const attempt of [attempt1, attempt2]) {
      expect(attempt.traceId).toBe(INCOMING_TRACE);
      expect(attempt.parentSpanId).toBe(server.spanId);
      expect(attempt.attributes).toMatchObject({
        "http.request.method": "GET",
        "url.full": "https://api.example.com:8443/base/v1/orders/42",
        "server.address": "api.example.com",
        "server.port": 8443,
        "network.protocol.version": "1.1",
        "bearer_proxy.upstream": "orders",
      });
    }
    expect(attempt1.attributes["http.response.status_code"]).toBe(401);
    expect(attempt1.attributes["error.type"]).toBe("401");
    expect(attempt1.status.code).toBe(2);
    expect(attempt2.attributes["http.response.status_code"]).toBe(200);
    expect(attempt2.status.code).toBe(0);

    // What the upstream receives: same trace, the attempt as parent, sampled.
    expect(firstParent).toEqual({ traceId: INCOMING_TRACE, spanId: attempt1.spanId, flags: "01" });
    expect(replayParent).toEqual({ traceId: INCOMING_TRACE, spanId: attempt2.spanId, flags: "01" });

    const waitSpan = only(spans, "token wait", "internal");
    expect(waitSpan).toMatchObject({ traceId: INCOMING_TRACE, parentSpanId: server.spanId });
    expect(waitSpan.attributes).toEqual({ "bearer_proxy.upstream": "orders" });
    const fetchSpan = only(spans, "token fetch", "client");
    expect(fetchSpan).toMatchObject({ traceId: INCOMING_TRACE, parentSpanId: waitSpan.spanId });
    expect(fetchSpan.attributes).toEqual({
      "bearer_proxy.upstream": "orders",
      "url.full": "https://idp.example.com/oauth2/token",
      "server.address": "idp.example.com",
      "server.port": 443,
    });

    expect(serverSpan.resource).toMatchObject({
      "service.name": "bearer-proxy",
      "service.version": "9.9.9-test",
      "telemetry.sdk.language": "nodejs",
    });
    expect(serverSpan.scope.name).toBe("bearer-proxy");
  });

  it("starts a trace for a request without traceparent", async () => {
    const server = fx.tracing.startServerSpan({ headers: {}, method: "POST", httpVersion: "1.1" });
    const attempt = server.startClientSpan("POST", "http://10.0.0.7", "/submit", "default");
    const sent = parseTraceparent(attempt.traceparent());
    attempt.end(201);
    server.end(201);

    const spans = await fx.flushed();
    const serverSpan = only(spans, "POST", "server");
    expect(serverSpan.parentSpanId).toBe("");
    expect(serverSpan.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(serverSpan.traceId).not.toBe("0".repeat(32));
    expect(serverSpan.traceId).toBe(server.traceId);
    const clientSpan = only(spans, "POST", "client");
    expect(clientSpan.attributes).toMatchObject({
      "server.address": "10.0.0.7",
      "server.port": 80,
    });
    expect(sent).toEqual({ traceId: server.traceId, spanId: clientSpan.spanId, flags: "01" });
  });

  it("ignores a malformed traceparent and starts a trace", async () => {
    const server = fx.tracing.startServerSpan({
      headers: { traceparent: "00-not-a-trace-01", tracestate: "vendor=abc" },
      method: "GET",
    });
    server.end(200);
    const spans = await fx.flushed();
    expect(only(spans, "GET", "server")).toMatchObject({ parentSpanId: "", traceState: "" });
  });

  it("records an unknown method as _OTHER, named HTTP", async () => {
    const server = fx.tracing.startServerSpan({ headers: {}, method: "PURGE" });
    server.startClientSpan("PURGE", "https://cdn.example", "/x", "cdn").end(204);
    server.end(204);
    const spans = await fx.flushed();
    for (const kind of ["server", "client"]) {
      expect(only(spans, "HTTP", kind).attributes).toMatchObject({
        "http.request.method": "_OTHER",
        "http.request.method_original": "PURGE",
      });
    }
  });
});
