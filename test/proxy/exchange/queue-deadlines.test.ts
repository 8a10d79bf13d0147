/**
 * The pool-queue deadlines of one upstream on one timer (exchange/queue-deadlines.ts): waiters
 * expire oldest first, each once, not before their time; one that got its connection never
 * expires; a thousand waiters hold one timer between them.
 */
import { describe, expect, it, vi } from "vitest";
import { QueueDeadlines, type QueueWaiter } from "../../../src/proxy/exchange/queue-deadlines.js";

function waiter(name: string, expired: { name: string; lateMs: number }[]): QueueWaiter {
  const w: QueueWaiter = {
    queueDeadlineMs: 0,
    queuePrev: undefined,
    queueNext: undefined,
    queueExpired() {
      expired.push({ name, lateMs: performance.now() - w.queueDeadlineMs });
    },
  };
  return w;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("QueueDeadlines", () => {
  it("expires waiters oldest first, each once and never early; a removed one never", async () => {
    const deadlines = new QueueDeadlines(40);
    const expired: { name: string; lateMs: number }[] = [];
    const a = waiter("a", expired);
    const b = waiter("b", expired);
    const c = waiter("c", expired);
    deadlines.add(a);
    await sleep(15);
    deadlines.add(b);
    deadlines.add(c);
    deadlines.remove(b); // got its connection
    await sleep(200);
    expect(expired.map((e) => e.name)).toEqual(["a", "c"]);
    for (const e of expired) expect(e.lateMs).toBeGreaterThanOrEqual(0);
    expect(deadlines.size).toBe(0);
  });

  it("re-adding a waiter (a resend that queues again) restarts its wait", () => {
    // Fake time: with real timers a stall of the test process past the second deadline would
    // expire `a` before the check that it has not.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const deadlines = new QueueDeadlines(60);
      const expired: { name: string; lateMs: number }[] = [];
      const a = waiter("a", expired);
      deadlines.add(a);
      const firstDeadline = a.queueDeadlineMs;
      vi.advanceTimersByTime(30);
      deadlines.remove(a);
      deadlines.add(a);
      expect(a.queueDeadlineMs).toBe(firstDeadline + 30);
      expect(deadlines.size).toBe(1);
      vi.advanceTimersByTime(45); // at 75: past the first deadline (60), before the second (90)
      expect(expired).toEqual([]);
      vi.advanceTimersByTime(15);
      expect(expired.map((e) => e.name)).toEqual(["a"]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("keeps one timer when an expiry adds a waiter (the next pipelined request queues at once)", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const deadlines = new QueueDeadlines(100);
      let made = 0;
      const next = (): QueueWaiter => {
        made++;
        const w: QueueWaiter = {
          queueDeadlineMs: 0,
          queuePrev: undefined,
          queueNext: undefined,
          queueExpired: () => deadlines.add(next()),
        };
        return w;
      };
      deadlines.add(next());
      vi.advanceTimersByTime(50);
      deadlines.add(next()); // due after the first: the loop re-arms for it after the expiry
      for (let i = 0; i < 20; i++) {
        vi.advanceTimersByTime(50);
        expect(vi.getTimerCount()).toBe(1);
      }
      expect(made).toBeGreaterThan(10);
      expect(deadlines.size).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it("keeps one timer for a thousand waiters, and none once they are gone", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance"] });
    try {
      const deadlines = new QueueDeadlines(1_000);
      const expired: { name: string; lateMs: number }[] = [];
      const waiters = Array.from({ length: 1_000 }, (_, i) => waiter(String(i), expired));
      for (const w of waiters) deadlines.add(w);
      expect(vi.getTimerCount()).toBe(1);
      for (const w of waiters.slice(0, 500)) deadlines.remove(w);
      vi.advanceTimersByTime(1_000);
      expect(expired.map((e) => e.name)).toEqual(waiters.slice(500).map((_, i) => String(500 + i)));
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
