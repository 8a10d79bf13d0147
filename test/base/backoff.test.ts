import { describe, expect, it } from "vitest";
import { computeBackoffMs } from "../../src/base/backoff.js";
import { seededRandom } from "../token/helpers.js";

const policy = { initialBackoffMs: 1_000, maxBackoffMs: 30_000 };

describe("computeBackoffMs", () => {
  it("full jitter: attempt n is uniform in [0, min(30 s, 1 s·2^(n-1)))", () => {
    const random = seededRandom(7);
    for (let attempt = 1; attempt <= 10; attempt++) {
      const cap = Math.min(30_000, 1_000 * 2 ** (attempt - 1));
      const draws = Array.from({ length: 2_000 }, () =>
        computeBackoffMs(policy, { attempt, random }),
      );
      expect(Math.min(...draws)).toBeGreaterThanOrEqual(0);
      expect(Math.max(...draws)).toBeLessThanOrEqual(cap);
      // Spread over the whole range, not stuck at one end.
      expect(Math.max(...draws)).toBeGreaterThan(cap * 0.95);
      expect(Math.min(...draws)).toBeLessThan(cap * 0.05);
      const mean = draws.reduce((a, b) => a + b, 0) / draws.length;
      expect(mean).toBeGreaterThan(cap * 0.45);
      expect(mean).toBeLessThan(cap * 0.55);
    }
  });

  it("extremes of the random source hit the bounds exactly", () => {
    expect(computeBackoffMs(policy, { attempt: 1, random: () => 0 })).toBe(0);
    expect(computeBackoffMs(policy, { attempt: 3, random: () => 0.999_999 })).toBe(4_000);
    expect(computeBackoffMs(policy, { attempt: 100, random: () => 0.999_999 })).toBe(30_000);
  });

  it("Retry-After is a lower bound", () => {
    expect(computeBackoffMs(policy, { attempt: 1, retryAfterSeconds: 7, random: () => 0.5 })).toBe(
      7_000,
    );
    expect(computeBackoffMs(policy, { attempt: 6, retryAfterSeconds: 1, random: () => 0.5 })).toBe(
      15_000,
    );
  });

  it("configuration faults wait at least the maximum, from the first attempt", () => {
    const random = seededRandom(3);
    for (let i = 0; i < 500; i++) {
      const delay = computeBackoffMs(policy, { attempt: 1, configFault: true, random });
      expect(delay).toBeGreaterThanOrEqual(30_000);
      expect(delay).toBeLessThanOrEqual(33_000);
    }
  });
});
