/**
 * Issue #25: tracing is off unless asked for, and off is a constant no-op: the same span
 * objects every time, no traceparent of our own (the client's is forwarded untouched).
 */
import { describe, expect, it } from "vitest";
import { createTracing, NOOP_TRACING } from "../../src/observability/tracing.js";
import { capturingLogger } from "./tracing-fixture.js";

describe("tracing off", () => {
  it.each([
    [{}, undefined],
    [{ OTEL_TRACES_EXPORTER: "none" }, undefined],
    [{ OTEL_TRACES_EXPORTER: "none" }, { exporter: "otlp" as const }],
    [{ OTEL_TRACES_EXPORTER: "otlp", OTEL_SDK_DISABLED: "true" }, undefined],
    [{}, { exporter: "none" as const }],
  ])("env %j, config %j → NOOP_TRACING", async (env, config) => {
    const { logger } = capturingLogger();
    expect(await createTracing({ env, config, logger })).toBe(NOOP_TRACING);
  });

  it("hands out shared constant spans", () => {
    const a = NOOP_TRACING.startServerSpan({ headers: { traceparent: "00-x" }, method: "GET" });
    const b = NOOP_TRACING.startServerSpan({ headers: {}, method: "POST" });
    expect(a).toBe(b);
    expect(Object.isFrozen(a)).toBe(true);
    expect([a.traceId, a.spanId]).toEqual(["", ""]);
    const client = a.startClientSpan("GET", "https://api.example", "/", "u");
    expect(client).toBe(b.startClientSpan("POST", "https://other.example", "/x", "v", 1));
    expect(client.traceparent()).toBeUndefined();
    expect(client.tracestate()).toBeUndefined();
    expect(a.startTokenSpan("u")).toBe(NOOP_TRACING.startTokenFetchSpan("u"));
    expect(NOOP_TRACING.enabled).toBe(false);
  });

  it("warns about an exporter it can't use, and stays off", async () => {
    const { logger, records } = capturingLogger();
    expect(await createTracing({ env: { OTEL_TRACES_EXPORTER: "jaeger" }, logger })).toBe(
      NOOP_TRACING,
    );
    expect(records).toMatchObject([
      {
        level: "warn",
        component: "tracing",
        msg: 'OTEL_TRACES_EXPORTER: exporter "jaeger" is not supported (only otlp)',
      },
    ]);
  });

  it("turns on from the config alone", async () => {
    const { logger } = capturingLogger();
    const tracing = await createTracing({
      env: { OTEL_TRACES_SAMPLER: "always_off" },
      config: { exporter: "otlp" },
      logger,
    });
    try {
      expect(tracing.enabled).toBe(true);
    } finally {
      await tracing.shutdown();
    }
  });
});
