/**
 * One Retry-After reader for the token source and the pacers (issue 31): delta-seconds and the
 * three HTTP-date forms of RFC 9110 §5.6.7, uncapped; each caller applies its own bound
 * (test/token/response-text.test.ts, test/pacing/upstream-pause.test.ts).
 */
import { describe, expect, it } from "vitest";
import { parseHttpDate, retryAfterMs } from "../../src/base/retry-after.js";

const NOW_WALL_MS = Date.UTC(2026, 10, 22, 12, 0, 0);

describe("retryAfterMs", () => {
  it("reads delta-seconds", () => {
    expect(retryAfterMs("120", NOW_WALL_MS)).toBe(120_000);
    expect(retryAfterMs(" 0 ", NOW_WALL_MS)).toBe(0);
    expect(retryAfterMs(["3", "9"], NOW_WALL_MS)).toBe(3_000);
  });

  it("reads the three HTTP-date forms of RFC 9110 §5.6.7, as GMT", () => {
    expect(retryAfterMs("Sun, 22 Nov 2026 12:00:30 GMT", NOW_WALL_MS)).toBe(30_000);
    expect(retryAfterMs("Sunday, 22-Nov-26 12:01:00 GMT", NOW_WALL_MS)).toBe(60_000);
    expect(retryAfterMs("Sun Nov 22 12:00:05 2026", NOW_WALL_MS)).toBe(5_000);
  });

  it("treats a date in the past as 0, caps nothing, ignores what it can't read", () => {
    expect(retryAfterMs("Sun, 22 Nov 2026 11:00:00 GMT", NOW_WALL_MS)).toBe(0);
    expect(retryAfterMs("31536000", NOW_WALL_MS)).toBe(31_536_000_000);
    for (const bad of [
      "",
      "-1",
      "1.5",
      "soon",
      "Sun, 31 Feb 2026 12:00:00 GMT",
      // Date.parse reads these; RFC 9110 does not send them.
      "2026-11-22T12:00:30Z",
      "Sun, 22 Nov 2026 12:00:30 +0000",
      undefined,
    ]) {
      expect(retryAfterMs(bad, NOW_WALL_MS), String(bad)).toBeUndefined();
    }
  });

  it("takes a two-digit RFC 850 year as the most recent past such year", () => {
    expect(parseHttpDate("Sunday, 22-Nov-26 12:00:00 GMT", NOW_WALL_MS)).toBe(NOW_WALL_MS);
    expect(parseHttpDate("Monday, 22-Nov-99 12:00:00 GMT", NOW_WALL_MS)).toBe(
      Date.UTC(1999, 10, 22, 12, 0, 0),
    );
  });
});
