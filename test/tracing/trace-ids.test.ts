/**
 * The pooled ids (observability/tracing-ids.ts): W3C-valid (lowercase hex of the right length,
 * never all zeros) and distinct across pool refills; a root request's three ids drawn at once,
 * with the sampling key the SDK's ratio sampler folds from the same trace id.
 */

import { TraceIdRatioBasedSampler } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { drawRootIds, newSpanId, newTraceId } from "../../src/observability/tracing-ids.js";

describe("tracing ids", () => {
  it("draws valid, distinct trace and span ids across several pool refills", () => {
    const seen = new Set<string>();
    // 64 KiB pool: 10,000 × (16 + 8 + 8) bytes refill it ~5 times.
    for (let i = 0; i < 10_000; i++) {
      const traceId = newTraceId();
      const spanId = newSpanId();
      const attemptId = newSpanId();
      expect(traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(spanId).toMatch(/^[0-9a-f]{16}$/);
      expect(attemptId).toMatch(/^[0-9a-f]{16}$/);
      expect(traceId).not.toBe("0".repeat(32));
      expect(spanId).not.toBe("0".repeat(16));
      seen.add(traceId).add(spanId).add(attemptId);
    }
    expect(seen.size).toBe(30_000);
  });

  it("draws a root request's ids at once, with the sampling key the SDK folds from the hex", () => {
    // The SDK's ratio sampler compares this fold (its _accumulate) with its bound.
    const sdk = new TraceIdRatioBasedSampler(0.5) as unknown as {
      _accumulate(traceId: string): number;
    };
    const seen = new Set<string>();
    // 5,000 × (32 + 8) bytes: ~3 refills, the draws interleaved with single ids so they meet
    // the pool's end at odd offsets.
    for (let i = 0; i < 5_000; i++) {
      const ids = drawRootIds();
      newSpanId();
      expect(ids.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(ids.spanId).toMatch(/^[0-9a-f]{16}$/);
      expect(ids.attemptSpanId).toMatch(/^[0-9a-f]{16}$/);
      expect(ids.samplingKey).toBe(sdk._accumulate(ids.traceId));
      seen.add(ids.traceId).add(ids.spanId).add(ids.attemptSpanId);
    }
    expect(seen.size).toBe(15_000);
  });
});
