/**
 * Issue #25 end to end: a request through the real proxy to a real HTTPS upstream (the
 * emulator) continues the client's trace — SERVER span child of the client's span, CLIENT span
 * child of the SERVER span, the upstream's traceparent naming the CLIENT span — with the
 * stable HTTP semantic conventions, over both OTLP/HTTP encodings.
 */
import { request } from "undici";
import { describe, expect, it } from "vitest";
import type { EchoResponse } from "../../src/emulator/index.js";
import { echoedHeader, echoedHeaders, useTracedProxyBench } from "./proxy-fixture.js";
import {
  attemptSpanAttributes,
  only,
  PROTOCOLS,
  parseTraceparent,
  serverSpanAttributes,
} from "./tracing-fixture.js";

const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";

describe.each(PROTOCOLS)("proxy span tree over %s", (protocol) => {
  const bench = useTracedProxyBench();

  const start = async () => {
    bench.proxy = await bench.start({
      protocol,
      upstreams: [{ name: "orders", baseUrl: bench.emulator.url }],
    });
    return bench.proxy;
  };

  it("continues the client's trace through the proxy to the upstream", async () => {
    const { url, receiver, flushed } = await start();
    const response = await request(`${url}/echo/orders/42?page=2`, {
      headers: {
        traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
        tracestate: "vendor=abc",
      },
    });
    expect(response.statusCode).toBe(200);
    const echo = (await response.body.json()) as EchoResponse;

    const spans = await flushed();
    expect(receiver.exports[0]?.contentType).toBe(
      protocol === "http/json" ? "application/json" : "application/x-protobuf",
    );
    const server = only(spans, "GET", "server");
    expect(server).toMatchObject({
      traceId: CLIENT_TRACE,
      parentSpanId: CLIENT_SPAN,
      traceState: "vendor=abc",
      status: { code: 0 },
    });
    expect(server.attributes).toEqual(
      serverSpanAttributes({ path: "/echo/orders/42", upstream: "orders", status: 200 }),
    );

    const client = only(spans, "GET", "client");
    expect(client).toMatchObject({
      traceId: CLIENT_TRACE,
      parentSpanId: server.spanId,
      status: { code: 0 },
    });
    expect(client.attributes).toEqual(
      attemptSpanAttributes({
        url: `${bench.emulator.url}/echo/orders/42`,
        upstream: "orders",
        status: 200,
      }),
    );
    expect(client.attributes["server.port"]).toBe(bench.emulator.port);

    // The upstream saw the CLIENT span as its parent, in the client's trace, sampled.
    expect(parseTraceparent(echoedHeader(echo, "traceparent"))).toEqual({
      traceId: CLIENT_TRACE,
      spanId: client.spanId,
      flags: "01",
    });
    expect(echoedHeaders(echo, "tracestate")).toEqual(["vendor=abc"]);

    // The first request waited for the token: that wait is in the trace too.
    const wait = only(spans, "token wait", "internal");
    expect(wait).toMatchObject({ traceId: CLIENT_TRACE, parentSpanId: server.spanId });
    expect(wait.attributes).toEqual({ "bearer_proxy.upstream": "orders" });

    for (const span of spans) {
      expect(span.resource).toMatchObject({
        "service.name": "bearer-proxy",
        "service.version": "9.9.9-test",
      });
    }
  });

  it("starts a new trace for a request without traceparent", async () => {
    const { url, flushed } = await start();
    const response = await request(`${url}/echo/new`, { method: "POST", body: "hello" });
    expect(response.statusCode).toBe(200);
    const echo = (await response.body.json()) as EchoResponse;

    const spans = await flushed();
    const server = only(spans, "POST", "server");
    expect(server.parentSpanId).toBe("");
    expect(server.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(server.traceId).not.toBe("0".repeat(32));
    const client = only(spans, "POST", "client");
    expect(client).toMatchObject({ traceId: server.traceId, parentSpanId: server.spanId });
    expect(parseTraceparent(echoedHeader(echo, "traceparent"))).toEqual({
      traceId: server.traceId,
      spanId: client.spanId,
      flags: "01",
    });
    expect(echoedHeaders(echo, "tracestate")).toEqual([]);
  });

  it("gives each request its own SERVER span: a warm token means no token wait", async () => {
    const { url, flushed } = await start();
    for (const path of ["/echo/one", "/echo/two"]) {
      const response = await request(`${url}${path}`);
      await response.body.text();
    }
    const spans = await flushed();
    const servers = spans.filter((s) => s.kind === "server");
    expect(servers).toHaveLength(2);
    expect(new Set(servers.map((s) => s.traceId)).size).toBe(2);
    expect(spans.filter((s) => s.name === "token wait")).toHaveLength(1);
    const second = servers.find((s) => s.attributes["url.path"] === "/echo/two")!;
    expect(
      spans
        .filter((s) => s.traceId === second.traceId)
        .map((s) => s.kind)
        .sort(),
    ).toEqual(["client", "server"]);
  });
});
