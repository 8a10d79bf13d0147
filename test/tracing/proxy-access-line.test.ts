/**
 * Issue #25, "Logs": with tracing on, the access line carries `trace_id` and `span_id` — the
 * request's SERVER span, so a log line leads to its trace. With tracing off it carries
 * neither, and the client's own `traceparent`/`tracestate` reach the upstream untouched (the
 * proxy is then invisible to tracing, as before).
 */
import { request } from "undici";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { EchoResponse, Emulator } from "../../src/emulator/index.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { echoedHeaders, startTracedProxy, type TracedProxy } from "./proxy-fixture.js";
import { only } from "./tracing-fixture.js";

const CLIENT_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const CLIENT_TRACESTATE = "vendor=abc,other=xyz";

describe("trace ids on the access line", () => {
  let pki: TestPki;
  let emulator: Emulator;
  let proxy: TracedProxy | undefined;

  beforeAll(async () => {
    pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
  });
  afterAll(() => emulator.close());
  afterEach(async () => {
    await proxy?.close();
    proxy = undefined;
  });

  const start = (off: boolean) =>
    startTracedProxy({
      caPem: pki.caPem,
      off,
      upstreams: [{ name: "sheets", baseUrl: emulator.url }],
    });

  it("tracing on: trace_id and span_id are the SERVER span's", async () => {
    proxy = await start(false);
    for (const headers of [{ traceparent: CLIENT_TRACEPARENT }, {}]) {
      const response = await request(`${proxy.url}/echo/logged`, { headers });
      await response.body.text();
    }
    const servers = (await proxy.flushed()).filter((s) => s.kind === "server");
    const lines = proxy.accessLines();
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
    proxy = await start(true);
    const response = await request(`${proxy.url}/echo/untraced`, {
      headers: { traceparent: CLIENT_TRACEPARENT, tracestate: CLIENT_TRACESTATE },
    });
    const echo = (await response.body.json()) as EchoResponse;
    expect(echoedHeaders(echo, "traceparent")).toEqual([CLIENT_TRACEPARENT]);
    expect(echoedHeaders(echo, "tracestate")).toEqual([CLIENT_TRACESTATE]);

    const plain = await request(`${proxy.url}/echo/plain`);
    expect(echoedHeaders((await plain.body.json()) as EchoResponse, "traceparent")).toEqual([]);

    const lines = proxy.accessLines();
    expect(lines).toHaveLength(2);
    for (const line of lines) {
      expect(line).not.toHaveProperty("trace_id");
      expect(line).not.toHaveProperty("span_id");
    }
    expect(await proxy.flushed()).toEqual([]);
    expect(proxy.receiver.exports).toEqual([]);
  });
});
