/**
 * A collector slower than the spans made fills the batch processor's queue, and the SDK drops
 * what doesn't fit, telling only its global diag logger (which we don't set). We count those
 * drops and say so through our logger with the count of the whole stall, once the queue moves
 * again — an operator must learn that traces are incomplete.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTracingFixture, type TracingFixture } from "./tracing-fixture.js";

const QUEUE = 10;
const BATCH = 5;

describe("span export queue full", () => {
  let fx: TracingFixture;
  beforeEach(async () => {
    fx = await startTracingFixture("http/protobuf", {
      OTEL_BSP_MAX_QUEUE_SIZE: String(QUEUE),
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: String(BATCH),
    });
  });
  afterEach(async () => {
    await fx.close();
  });

  const endSpans = (count: number) => {
    for (let i = 0; i < count; i++) {
      fx.tracing.startServerSpan({ headers: {}, method: "GET" }).end(200);
    }
  };
  const queueReports = () =>
    fx.records.filter((r) => String(r.msg).startsWith("span export queue full"));

  it("counts the spans dropped while the collector stalls and reports them once it moves", async () => {
    const stall = fx.receiver.hold();
    // A full batch goes out at once, and the processor exports one batch at a time: the next
    // QUEUE spans wait behind the stalled export, and 7 more find the queue full.
    endSpans(BATCH);
    endSpans(QUEUE);
    endSpans(7);
    expect(queueReports()).toEqual([]);

    stall.release();
    await fx.tracing.forceFlush();
    await fx.receiver.waitForSpans(BATCH + QUEUE);
    expect(fx.receiver.spans).toHaveLength(BATCH + QUEUE);
    const reports = queueReports();
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({ level: "warn", droppedSpans: 7, maxQueueSize: QUEUE });

    // Nothing dropped when the queue keeps up: no further report.
    endSpans(BATCH);
    await fx.tracing.forceFlush();
    await fx.receiver.waitForSpans(2 * BATCH + QUEUE);
    expect(queueReports()).toHaveLength(1);

    // Drops within the minute after a report wait for the next one, or for shutdown; the count
    // is exactly what never reached the collector (whether the first batch left at once
    // depends on the processor's export chain, so it is counted, not assumed).
    const before = fx.receiver.spans.length;
    const again = fx.receiver.hold();
    endSpans(BATCH + QUEUE + 3);
    again.release();
    await fx.tracing.forceFlush();
    expect(queueReports()).toHaveLength(1);
    await fx.tracing.shutdown();
    const lost = BATCH + QUEUE + 3 - (fx.receiver.spans.length - before);
    expect(lost).toBeGreaterThanOrEqual(3);
    expect(queueReports()).toHaveLength(2);
    expect(queueReports()[1]).toMatchObject({ droppedSpans: lost });
  });

  it("a sampled-out span takes no place in the queue and is never counted", async () => {
    await fx.close();
    fx = await startTracingFixture("http/protobuf", {
      OTEL_BSP_MAX_QUEUE_SIZE: String(QUEUE),
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: String(BATCH),
      OTEL_TRACES_SAMPLER: "always_off",
    });
    const stall = fx.receiver.hold();
    endSpans(100);
    stall.release();
    await fx.tracing.forceFlush();
    expect(fx.receiver.spans).toEqual([]);
    expect(queueReports()).toEqual([]);
  });
});
