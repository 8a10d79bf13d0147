/**
 * A collector that refuses spans is reported through our logger (OpenTelemetry would tell its
 * global diag logger, which we don't set), at most once a minute, and its recovery too.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTracingFixture, type TracingFixture } from "./tracing-fixture.js";

describe("span export failures", () => {
  let fx: TracingFixture;
  beforeEach(async () => {
    fx = await startTracingFixture("http/protobuf", {
      OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=collector-key-9",
    });
  });
  afterEach(async () => {
    await fx.close();
  });

  it("warns once with the count, then says when export works again", async () => {
    // 400 is not retryable: the export fails at once.
    fx.receiver.failNext(2, 400);
    fx.tracing.startServerSpan({ headers: {}, method: "GET" }).end(200);
    await fx.tracing.forceFlush();
    fx.tracing.startServerSpan({ headers: {}, method: "GET" }).end(200);
    await fx.tracing.forceFlush();
    fx.tracing.startServerSpan({ headers: {}, method: "GET" }).end(200);
    await fx.tracing.forceFlush();

    expect(fx.receiver.spans).toHaveLength(1);
    const reports = fx.records.filter((r) => r.component === "tracing" && r.msg !== undefined);
    const failed = reports.filter((r) => r.msg === "span export failed: spans dropped");
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ level: "warn", failedExports: 1, droppedSpans: 1 });
    expect(reports.find((r) => r.msg === "span export works again")).toMatchObject({
      level: "info",
      failedExports: 1,
      droppedSpans: 1,
    });
    expect(fx.lines.join("")).not.toContain("collector-key-9");
  });
});
