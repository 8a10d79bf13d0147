/**
 * The pooled ids (observability/tracing-ids.ts): W3C-valid (lowercase hex of the right length,
 * never all zeros) and distinct across pool refills.
 */
import { describe, expect, it } from "vitest";
import { newSpanId, newTraceId } from "../../src/observability/tracing-ids.js";

describe("tracing ids", () => {
  it("draws valid, distinct trace and span ids across several pool refills", () => {
    const seen = new Set<string>();
    // 4096-byte pool: 2,000 × (16 + 8 + 8) bytes refill it ~15 times.
    for (let i = 0; i < 2_000; i++) {
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
    expect(seen.size).toBe(6_000);
  });
});
