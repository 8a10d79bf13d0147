/**
 * Issue #25 as an operator turns it on: the built CLI (`node dist/cli.js run`) as a child
 * process, configured by the standard OTEL_* environment (or `tracing.exporter: otlp` in the
 * file), exports a request's spans to a real OTLP/HTTP receiver — this is main.ts's wiring,
 * not a test's. Spans still queued when SIGTERM comes are exported before the process exits.
 * Needs `npm run build` (as `npm test` does first).
 */
import { request } from "undici";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { EchoResponse, Emulator } from "../../src/emulator/index.js";
import { VERSION } from "../../src/version.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type OtlpReceiver, startOtlpReceiver } from "../helpers/otlp-receiver.js";
import { type ProxyProcess, startProxyProcess } from "../helpers/proxy-process.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import { echoedHeader } from "./proxy-fixture.js";
import { only, parseTraceparent } from "./tracing-fixture.js";

const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";

describe("the CLI exports spans", () => {
  let emulator: Emulator;
  let receiver: OtlpReceiver;
  let proc: ProxyProcess | undefined;

  beforeAll(async () => {
    emulator = await startTlsEmulator(await createTestPki());
  });
  afterAll(() => emulator.close());
  beforeEach(async () => {
    receiver = await startOtlpReceiver();
  });
  afterEach(async () => {
    await proc?.stop();
    proc = undefined;
    await receiver.close();
  });

  /** JSON is YAML: the config file of a proxy in front of the emulator. */
  const configYaml = (extra: Record<string, unknown> = {}) =>
    JSON.stringify({
      listen: { host: "127.0.0.1", port: 0 },
      admin: { host: "127.0.0.1", port: 0 },
      shutdown: { drainDelay: "0s", timeout: "1s" },
      upstreams: [
        {
          name: "sheets",
          baseUrl: emulator.url,
          clientId: "demo-client",
          clientSecret: "demo-secret",
          tls: { caFile: emulator.caFile },
        },
      ],
      ...extra,
    });

  const get = async (path: string) => {
    const response = await request(`${proc!.proxyUrl}${path}`, {
      headers: { traceparent: `00-${CLIENT_TRACE}-00f067aa0ba902b7-01` },
    });
    expect(response.statusCode).toBe(200);
    return (await response.body.json()) as EchoResponse;
  };

  it("OTEL_TRACES_EXPORTER=otlp: spans arrive, queued ones are flushed on SIGTERM", async () => {
    proc = await startProxyProcess(configYaml(), {
      OTEL_TRACES_EXPORTER: "otlp",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "checkout-sidecar",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=test,k8s.pod.name=pod-1",
      // Nothing leaves on the timer: only the shutdown flush can deliver these spans.
      OTEL_BSP_SCHEDULE_DELAY: "600000",
    });
    const echo = await get("/echo/via-cli");
    expect(proc.output()).toContain("tracing on: exporting spans over OTLP");
    expect(receiver.spans).toEqual([]);

    expect(await proc.stop()).toBe(0);
    proc = undefined;
    const spans = await receiver.waitForSpans(2);
    const server = only(spans, "GET", "server");
    const client = only(spans, "GET", "client");
    expect(server).toMatchObject({ traceId: CLIENT_TRACE, parentSpanId: "00f067aa0ba902b7" });
    expect(client.parentSpanId).toBe(server.spanId);
    expect(parseTraceparent(echoedHeader(echo, "traceparent")).spanId).toBe(client.spanId);
    expect(server.resource).toMatchObject({
      "service.name": "checkout-sidecar",
      "service.version": VERSION,
      "deployment.environment.name": "test",
      "k8s.pod.name": "pod-1",
    });
    expect(receiver.exports.every((e) => e.contentType === "application/json")).toBe(true);
  });

  it("tracing.exporter: otlp in the file turns it on too (endpoint from the env)", async () => {
    proc = await startProxyProcess(configYaml({ tracing: { exporter: "otlp" } }), {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.tracesUrl,
      OTEL_BSP_SCHEDULE_DELAY: "50",
    });
    await get("/echo/from-file");
    // The start's token fetch exports its own two spans, which can arrive first (50 ms batches):
    // wait for the request's pair, not for any two.
    await waitFor(
      () => receiver.spans.filter((s) => s.name === "GET").length >= 2,
      "the request's server and client spans",
      10_000,
    );
    const spans = receiver.spans;
    expect(only(spans, "GET", "server").traceId).toBe(CLIENT_TRACE);
    expect(receiver.exports[0]?.contentType).toBe("application/x-protobuf");
    expect(only(spans, "GET", "server").resource["service.name"]).toBe("bearer-proxy");
  });

  it("no OTEL_* and no tracing section: off, nothing exported", async () => {
    proc = await startProxyProcess(configYaml(), {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: "50",
    });
    const echo = await get("/echo/off");
    // The client's traceparent went through untouched.
    expect(echoedHeader(echo, "traceparent")).toBe(`00-${CLIENT_TRACE}-00f067aa0ba902b7-01`);
    expect(await proc.stop()).toBe(0);
    proc = undefined;
    expect(receiver.exports).toEqual([]);
  });
});
