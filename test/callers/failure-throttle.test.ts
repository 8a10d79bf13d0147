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

  it("blockOf reads no clock while no address is blocked (asked on every request), and finds a block once one starts", () => {
    let nowMs = 0;
    let clockReads = 0;
    const throttle = createFailureThrottle({
      maxFailures: 1,
      blockMs: 30_000,
      now: () => {
        clockReads++;
        return nowMs;
      },
    });
    expect(throttle.blockOf("10.0.0.1")).toBeUndefined();
    expect(clockReads).toBe(0);
    throttle.recordFailure("::ffff:10.0.0.1");
    expect(throttle.blockOf("10.0.0.1")).toEqual({ sinceMs: 0, retryAfterSeconds: 30 });
    expect(throttle.blockOf("10.0.0.2")).toBeUndefined();
    nowMs = 30_000;
    expect(throttle.blockOf("10.0.0.1")).toBeUndefined(); // over: forgotten, none left
    clockReads = 0;
    expect(throttle.blockOf("10.0.0.1")).toBeUndefined();
    expect(clockReads).toBe(0);
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

  it("counts an IPv6 peer with its whole /64: a fresh address per guess does not escape the block", () => {
    const throttle = createFailureThrottle({ maxFailures: 3, now: () => 0 });
    throttle.recordFailure("2001:db8:1:2::a");
    throttle.recordFailure("2001:db8:1:2::b");
    throttle.recordFailure("2001:db8:1:2:1234:5678:9abc:def0");
    expect(throttle.blockedFor("2001:db8:1:2::ffff")).toBe(60);
    expect(throttle.blockOf("2001:db8:1:2:8000::1")).toBeDefined();
    const refused = throttle.begin("2001:db8:1:2::c");
    expect(refused.admitted).toBe(false);
    // The neighbouring /64 is someone else.
    expect(throttle.blockedFor("2001:db8:1:3::a")).toBe(0);
    expect(throttle.begin("2001:db8:1:3::a").admitted).toBe(true);
  });

  it("forgets partial counts of the least recently seen addresses beyond maxAddresses", () => {
    const throttle = createFailureThrottle({ maxFailures: 2, maxAddresses: 2, now: () => 0 });
    throttle.recordFailure("10.0.0.1");
    throttle.recordFailure("10.0.0.2");
    throttle.recordFailure("10.0.0.3"); // 10.0.0.1's one failure is forgotten
    throttle.recordFailure("10.0.0.1");
    expect(throttle.blockedFor("10.0.0.1")).toBe(0);
    throttle.recordFailure("10.0.0.3");
    expect(throttle.blockedFor("10.0.0.3")).toBe(60);
  });

  // Issue 30: 10,050 failures from other addresses used to evict a blocked address's entry.
  it("a blocked address stays blocked whatever other addresses do", () => {
    let nowMs = 0;
    const throttle = createFailureThrottle({ maxAddresses: 100, now: () => nowMs });
    for (let i = 0; i < 10; i++) throttle.recordFailure("10.0.0.1");
    expect(throttle.blockedFor("10.0.0.1")).toBe(60);
    for (let i = 0; i < 20_000; i++) {
      throttle.recordFailure(`10.1.${i >> 8}.${i & 255}`);
      if (i % 1000 === 0) throttle.begin(`10.2.${i >> 8}.${i & 255}`);
    }
    nowMs = 59_000;
    expect(throttle.blockedFor("10.0.0.1")).toBe(1);
    expect(throttle.blockOf("10.0.0.1")).toEqual({ sinceMs: 0, retryAfterSeconds: 1 });
    nowMs = 60_000;
    expect(throttle.blockedFor("10.0.0.1")).toBe(0);
  });

  it("holds at most maxBlocked blocks: expired ones go first, then the one nearest its end", () => {
    let nowMs = 0;
    const throttle = createFailureThrottle({ maxFailures: 1, maxBlocked: 2, now: () => nowMs });
    throttle.recordFailure("10.0.0.1");
    nowMs = 1_000;
    throttle.recordFailure("10.0.0.2");
    nowMs = 2_000;
    throttle.recordFailure("10.0.0.3");
    expect(throttle.blockedFor("10.0.0.1")).toBe(0);
    expect(throttle.blockedFor("10.0.0.2")).toBe(59);
    expect(throttle.blockedFor("10.0.0.3")).toBe(60);
    expect(throttle.blockedCount()).toBe(2);
    nowMs = 61_500; // 10.0.0.2's block is over: it makes room, 10.0.0.3 stays
    throttle.recordFailure("10.0.0.4");
    expect(throttle.blockedFor("10.0.0.3")).toBe(1);
    expect(throttle.blockedFor("10.0.0.4")).toBe(60);
    expect(throttle.blockedCount()).toBe(2);
  });
});

describe("verifications in flight", () => {
  it("each counts as a failure until it ends: the eleventh is refused at once", () => {
    const throttle = createFailureThrottle({ now: () => 0 });
    const tickets = Array.from({ length: 10 }, () => throttle.begin("10.0.0.1"));
    expect(tickets.every((t) => t.admitted)).toBe(true);
    expect(throttle.begin("10.0.0.1")).toEqual({ admitted: false, retryAfterSeconds: 1 });
    expect(throttle.begin("10.0.0.2").admitted).toBe(true);
    expect(throttle.blockedFor("10.0.0.1")).toBe(0);
  });

  it("a success gives its count back; failures stay counted and start the block", () => {
    const throttle = createFailureThrottle({ now: () => 0 });
    const tickets = Array.from({ length: 10 }, () => throttle.begin("10.0.0.1"));
    const [first, ...rest] = tickets;
    if (!first?.admitted) throw new Error("not admitted");
    first.end(false);
    first.end(true); // idempotent: the second end is ignored
    const again = throttle.begin("10.0.0.1");
    expect(again.admitted).toBe(true);
    for (const ticket of rest) if (ticket.admitted) ticket.end(true);
    expect(throttle.blockedFor("10.0.0.1")).toBe(0); // 9 failures, one still in flight
    if (again.admitted) again.end(true);
    expect(throttle.blockedFor("10.0.0.1")).toBe(60);
    expect(throttle.begin("10.0.0.1")).toEqual({ admitted: false, retryAfterSeconds: 60 });
  });

  it("failures earlier in the window leave room for fewer verifications", () => {
    const throttle = createFailureThrottle({ now: () => 0 });
    for (let i = 0; i < 7; i++) throttle.recordFailure("10.0.0.1");
    const admitted = Array.from({ length: 5 }, () => throttle.begin("10.0.0.1").admitted);
    expect(admitted).toEqual([true, true, true, false, false]);
  });
});
