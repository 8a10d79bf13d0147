/**
 * Issue #25: the exporter is configured the standard way, from the env object it is given:
 * endpoint (base + v1/traces, or the traces URL as is), headers (percent-decoded, the traces
 * ones winning), service name and resource attributes.
 */
import { afterEach, describe, expect, it } from "vitest";
import { startOtlpReceiver } from "../helpers/otlp-receiver.js";
import { only, PROTOCOLS, startTracingFixture, type TracingFixture } from "./tracing-fixture.js";

describe.each(PROTOCOLS)("exporter settings over %s", (protocol) => {
  let fx: TracingFixture | undefined;
  afterEach(async () => {
    await fx?.close();
    fx = undefined;
  });

  it("sends OTEL_EXPORTER_OTLP_HEADERS to the collector and names the service", async () => {
    fx = await startTracingFixture(protocol, {
      OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=k%20one,x-tenant=general, x-scope = all ",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-tenant=traces",
      OTEL_SERVICE_NAME: "orders-sidecar",
      OTEL_RESOURCE_ATTRIBUTES:
        "service.name=ignored,deployment.environment.name=prod,k8s.pod.name=orders-7f%2Cx",
    });
    fx.tracing.startServerSpan({ headers: {}, method: "GET" }).end(200);
    const spans = await fx.flushed();
    const [received] = fx.receiver.exports;
    expect(received?.headers).toMatchObject({
      "x-api-key": "k one",
      "x-tenant": "traces",
      "x-scope": "all",
    });
    expect(only(spans, "GET", "server").resource).toMatchObject({
      "service.name": "orders-sidecar",
      "deployment.environment.name": "prod",
      "k8s.pod.name": "orders-7f,x",
    });
    // Names only, never the values (often API keys).
    const announced = fx.records.find((r) => r.msg === "tracing on: exporting spans over OTLP");
    expect(announced).toMatchObject({
      protocol,
      headers: ["x-api-key", "x-tenant", "x-scope"],
      serviceName: "orders-sidecar",
      sampler: "parentbased_always_on",
    });
    expect(fx.lines.join("")).not.toContain("k one");
    expect(fx.lines.join("")).not.toContain("k%20one");
  });

  it("compresses the export with gzip when OTEL_EXPORTER_OTLP_COMPRESSION says so", async () => {
    fx = await startTracingFixture(protocol, { OTEL_EXPORTER_OTLP_COMPRESSION: "gzip" });
    for (const status of [200, 503]) {
      fx.tracing.startServerSpan({ headers: {}, method: "GET" }).end(status);
    }
    const spans = await fx.flushed();
    expect(spans.map((span) => span.attributes["http.response.status_code"]).sort()).toEqual([
      200, 503,
    ]);
    expect(fx.receiver.exports.map((e) => e.headers["content-encoding"])).toEqual(["gzip"]);
  });

  it("uses OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, over the base endpoint", async () => {
    const other = await startOtlpReceiver();
    try {
      fx = await startTracingFixture(protocol, {
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: other.tracesUrl,
      });
      fx.tracing.startServerSpan({ headers: {}, method: "GET" }).end(200);
      await fx.tracing.forceFlush();
      expect(await other.waitForSpans(1)).toHaveLength(1);
      expect(only(other.spans, "GET").resource["service.name"]).toBe("bearer-proxy");
    } finally {
      await fx?.close();
      fx = undefined;
      await other.close();
    }
  });
});
