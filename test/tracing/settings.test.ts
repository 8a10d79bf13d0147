/**
 * The OTEL_* variables as the spec reads them: when tracing is on, where spans go, how they're
 * sampled and batched; invalid values are reported and replaced by their defaults.
 */

import { describe, expect, it } from "vitest";
import { loggableUrl } from "../../src/base/loggable-url.js";
import {
  decideTracing,
  readTracingSettings,
  type TracingEnv,
} from "../../src/observability/tracing-settings.js";

function read(env: TracingEnv) {
  const warnings: string[] = [];
  const settings = readTracingSettings(env, (message) => warnings.push(message));
  return { settings, warnings };
}

describe("decideTracing", () => {
  it.each([
    [{}, undefined, false],
    [{}, { exporter: "none" as const }, false],
    [{}, { exporter: "otlp" as const }, true],
    [{ OTEL_TRACES_EXPORTER: "otlp" }, undefined, true],
    [{ OTEL_TRACES_EXPORTER: " none , otlp " }, undefined, true],
    [{ OTEL_TRACES_EXPORTER: "none" }, { exporter: "otlp" as const }, false],
    [{ OTEL_TRACES_EXPORTER: "" }, { exporter: "otlp" as const }, true],
    [{ OTEL_TRACES_EXPORTER: "otlp", OTEL_SDK_DISABLED: "TRUE" }, undefined, false],
    [{ OTEL_TRACES_EXPORTER: "otlp", OTEL_SDK_DISABLED: "false" }, undefined, true],
  ])("%j with config %j → %s", (env, config, on) => {
    expect(decideTracing(env, config)).toEqual({ on, warnings: [] });
  });

  it("reports exporters it doesn't support", () => {
    expect(decideTracing({ OTEL_TRACES_EXPORTER: "console,zipkin" }, undefined)).toEqual({
      on: false,
      warnings: [
        'OTEL_TRACES_EXPORTER: exporter "console" is not supported (only otlp)',
        'OTEL_TRACES_EXPORTER: exporter "zipkin" is not supported (only otlp)',
      ],
    });
  });
});

describe("readTracingSettings", () => {
  it("has the spec's defaults", () => {
    expect(read({})).toEqual({
      warnings: [],
      settings: {
        protocol: "http/protobuf",
        url: "http://localhost:4318/v1/traces",
        headers: {},
        timeoutMs: 10_000,
        compression: "none",
        serviceName: "bearer-proxy",
        resourceAttributes: {},
        sampler: "parentbased_always_on",
        samplerRatio: 1,
        batch: {
          scheduledDelayMs: 5000,
          exportTimeoutMs: 30_000,
          maxQueueSize: 2048,
          maxExportBatchSize: 512,
        },
      },
    });
  });

  it.each([
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "https://collector:4318" }, "https://collector:4318/v1/traces"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "https://gw/otlp/" }, "https://gw/otlp/v1/traces"],
    [
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: "https://collector:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://traces.example/custom",
      },
      "https://traces.example/custom",
    ],
  ])("endpoint from %j", (env, url) => {
    expect(read(env).settings.url).toBe(url);
  });

  it("takes the traces-specific protocol, timeout and compression first", () => {
    const { settings, warnings } = read({
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_TIMEOUT: "2000",
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "3000",
      OTEL_EXPORTER_OTLP_COMPRESSION: "none",
      OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: "gzip",
    });
    expect(warnings).toEqual([]);
    expect(settings).toMatchObject({ protocol: "http/json", timeoutMs: 3000, compression: "gzip" });
  });

  it("reads the sampler and its ratio, and batch limits", () => {
    const { settings, warnings } = read({
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.25",
      OTEL_BSP_SCHEDULE_DELAY: "0",
      OTEL_BSP_EXPORT_TIMEOUT: "1000",
      OTEL_BSP_MAX_QUEUE_SIZE: "100",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "10",
    });
    expect(warnings).toEqual([]);
    expect(settings).toMatchObject({
      sampler: "parentbased_traceidratio",
      samplerRatio: 0.25,
      batch: {
        scheduledDelayMs: 0,
        exportTimeoutMs: 1000,
        maxQueueSize: 100,
        maxExportBatchSize: 10,
      },
    });
  });

  it("reports invalid values and keeps the defaults, without echoing URLs or headers", () => {
    const { settings, warnings } = read({
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      OTEL_EXPORTER_OTLP_ENDPOINT: "not a url with secret-123",
      OTEL_EXPORTER_OTLP_HEADERS: "good=1,=nokey,bad%ZZ=x,noequals",
      OTEL_TRACES_SAMPLER: "jaeger_remote",
      OTEL_TRACES_SAMPLER_ARG: "0.5",
      OTEL_BSP_MAX_QUEUE_SIZE: "-3",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "4096",
      OTEL_EXPORTER_OTLP_COMPRESSION: "brotli",
    });
    expect(settings).toMatchObject({
      protocol: "http/protobuf",
      url: "http://localhost:4318/v1/traces",
      headers: { good: "1" },
      sampler: "parentbased_always_on",
      samplerRatio: 1,
      compression: "none",
      batch: { maxQueueSize: 2048, maxExportBatchSize: 2048 },
    });
    expect(warnings).toHaveLength(9);
    expect(warnings.join("\n")).not.toContain("secret-123");
    expect(warnings.join("\n")).not.toContain("nokey");
  });

  it("reports a ratio outside [0, 1]", () => {
    const { settings, warnings } = read({
      OTEL_TRACES_SAMPLER: "traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "1.5",
    });
    expect(settings.samplerRatio).toBe(1);
    expect(warnings).toEqual(['OTEL_TRACES_SAMPLER_ARG="1.5" is not in [0, 1]; using 1']);
  });

  it("names the service from OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES", () => {
    expect(
      read({ OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attrs,a=b" }).settings,
    ).toMatchObject({
      serviceName: "from-attrs",
      resourceAttributes: { a: "b" },
    });
    expect(
      read({ OTEL_SERVICE_NAME: "from-name", OTEL_RESOURCE_ATTRIBUTES: "service.name=x" }).settings
        .serviceName,
    ).toBe("from-name");
  });

  it("logs an endpoint without credentials or query", () => {
    expect(loggableUrl("https://user:pw@collector:4318/v1/traces?key=1")).toBe(
      "https://collector:4318/v1/traces",
    );
  });
});
