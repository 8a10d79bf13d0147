import { describe, expect, it } from "vitest";
import { createFailureThrottle } from "../../src/callers/failure-throttle.js";

describe("failure throttle", () => {
  it("blocks an address after maxFailures within the window, for blockMs", () => {
    let nowMs = 0;
    const throttle = createFailureThrottle({
      maxFailures: 3,
      windowMs: 10_000,
      blockMs: 30_000,
      now: () => nowMs,
    });
    throttle.recordFailure("10.0.0.1");
    throttle.recordFailure("10.0.0.1");
    expect(throttle.blockedFor("10.0.0.1")).toBe(0);
    throttle.recordFailure("10.0.0.1");
    expect(throttle.blockedFor("10.0.0.1")).toBe(30);
    expect(throttle.blockedFor("10.0.0.2")).toBe(0);
    nowMs = 29_001;
    expect(throttle.blockedFor("10.0.0.1")).toBe(1);
    nowMs = 30_000;
    expect(throttle.blockedFor("10.0.0.1")).toBe(0);
  });

  it("failures spread beyond the window do not add up", () => {
    let nowMs = 0;
    const throttle = createFailureThrottle({ maxFailures: 3, windowMs: 10_000, now: () => nowMs });
    for (let i = 0; i < 10; i++) {
      throttle.recordFailure("10.0.0.1");
      throttle.recordFailure("10.0.0.1");
      nowMs += 10_000;
    }
    expect(throttle.blockedFor("10.0.0.1")).toBe(0);
  });

  it("an IPv4-mapped peer counts as its IPv4 address", () => {
    const throttle = createFailureThrottle({ maxFailures: 2, now: () => 0 });
    throttle.recordFailure("::ffff:10.0.0.1");
    throttle.recordFailure("10.0.0.1");
    expect(throttle.blockedFor("::ffff:10.0.0.1")).toBe(60);
  });

  it("remembers at most maxAddresses", () => {
    const throttle = createFailureThrottle({ maxFailures: 1, maxAddresses: 2, now: () => 0 });
    throttle.recordFailure("10.0.0.1");
    throttle.recordFailure("10.0.0.2");
    throttle.recordFailure("10.0.0.3");
    expect(throttle.blockedFor("10.0.0.1")).toBe(0);
    expect(throttle.blockedFor("10.0.0.3")).toBe(60);
  });
});
