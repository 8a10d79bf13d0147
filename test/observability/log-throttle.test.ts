/**
 * The once-a-minute-with-a-count rule the recurring warnings share (key outages, Redis failures,
 * dropped spans): the first occurrence is told at once, later ones wait for the interval and
 * are told with their count; take() tells the rest whenever asked (a recovery, a shutdown).
 */
import { describe, expect, it } from "vitest";
import { createLogThrottle } from "../../src/observability/log-throttle.js";

describe("log throttle", () => {
  it("tells the first at once, then at most once per interval with the count since", () => {
    let nowMs = 1_000;
    const throttle = createLogThrottle(60_000, () => nowMs);
    expect(throttle.takeIfDue()).toBeUndefined(); // nothing happened
    throttle.count();
    expect(throttle.takeIfDue()).toBe(1);
    throttle.count();
    throttle.count(4);
    nowMs += 59_999;
    expect(throttle.takeIfDue()).toBeUndefined();
    nowMs += 1;
    expect(throttle.takeIfDue()).toBe(5);
    nowMs += 120_000;
    expect(throttle.takeIfDue()).toBeUndefined(); // due, but nothing to tell
  });

  it("take() tells what is left, due or not, and restarts the interval only when it told some", () => {
    let nowMs = 0;
    const throttle = createLogThrottle(60_000, () => nowMs);
    expect(throttle.take()).toBe(0);
    throttle.count(3);
    expect(throttle.take()).toBe(3);
    nowMs += 30_000;
    throttle.count();
    expect(throttle.takeIfDue()).toBeUndefined();
    nowMs += 30_000;
    expect(throttle.takeIfDue()).toBe(1);
  });
});
