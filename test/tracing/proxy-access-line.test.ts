/**
 * Issue #25, "Logs": with tracing on, the access line carries `trace_id` and `span_id` — the
 * request's SERVER span, so a log line leads to its trace. With tracing off it carries
 * neither, and the client's own `traceparent`/`tracestate` reach the upstream untouched (the
 * proxy is then invisible to tracing, as before).
 */
import { request } from "undici";
import { describe, expect, it } from "vitest";
import type { EchoResponse } from "../../src/emulator/index.js";
import { echoedHeaders, useTracedProxyBench } from "./proxy-fixture.js";
import { only } from "./tracing-fixture.js";

const CLIENT_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const CLIENT_TRACESTATE = "vendor=abc,other=xyz";

describe("trace ids on the access line", () => {
  const bench = useTracedProxyBench();

  const start = (off: boolean) =>
    bench.start({
      off,
      upstreams: [{ name: "sheets", baseUrl: bench.emulator.url }],
    });

  it("tracing on: trace_id and span_id are the SERVER span's", async () => {
    bench.proxy = await start(false);
    for (const headers of [{ traceparent: CLIENT_TRACEPARENT }, {}]) {
      const response = await request(`${bench.proxy.url}/echo/logged`, { headers });
      await response.body.text();
    }
    const servers = (await bench.proxy.flushed()).filter((s) => s.kind === "server");
    const lines = bench.proxy.accessLines();
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line.trace_id).toMatch(/^[0-9a-f]{32}$/);
      expect(line.span_id).toMatch(/^[0-9a-f]{16}$/);
      const server = only(
        servers.filter((s) => s.traceId === line.trace_id),
        "GET",
        "server",
      );
      expect(line.span_id).toBe(server.spanId);
    }
    expect(lines[0]!.trace_id).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
  });

  it("tracing off: no ids on the line, the client's trace context passes as sent", async () => {
    bench.proxy = await start(true);
    const response = await request(`${bench.proxy.url}/echo/untraced`, {
      headers: { traceparent: CLIENT_TRACEPARENT, tracestate: CLIENT_TRACESTATE },
    });
    const echo = (await response.body.json()) as EchoResponse;
    expect(echoedHeaders(echo, "traceparent")).toEqual([CLIENT_TRACEPARENT]);
    expect(echoedHeaders(echo, "tracestate")).toEqual([CLIENT_TRACESTATE]);

    const plain = await request(`${bench.proxy.url}/echo/plain`);
    expect(echoedHeaders((await plain.body.json()) as EchoResponse, "traceparent")).toEqual([]);

    const lines = bench.proxy.accessLines();
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).not.toHaveProperty("trace_id");
      expect(line).not.toHaveProperty("span_id");
    }
    expect(await bench.proxy.flushed()).toEqual([]);
    expect(bench.proxy.receiver.exports).toEqual([]);
  });
});
