/**
 * Issue 26: the local pacer's queue on a fake clock — a synchronous fast path, arrival order,
 * `wait` and the queue cap answered at once with Retry-After, keys that don't wait for each
 * other, aborts, and close.
 */
import { describe, expect, it } from "vitest";
import { type Admission, PacerClosedError } from "../../src/pacing/limiter.js";
import { createLocalPacer } from "../../src/pacing/local-pacer.js";
import { rateLimitPolicyValue, rateLimitValue } from "../../src/pacing/ratelimit-headers.js";
import { FakeClock } from "../helpers/fake-clock.js";

/** 10/s, strictly even: one every 100 ms (no margin, to keep the arithmetic round). */
const TEN_PER_SECOND = { requests: 10, perMs: 1_000, burst: 0, marginMs: 0 };

function pacerOn(
  clock: FakeClock,
  options: { waitMs?: number; maxQueue?: number; burst?: number } = {},
) {
  return createLocalPacer({
    rate: { ...TEN_PER_SECOND, burst: options.burst ?? 0 },
    waitMs: options.waitMs ?? 1_000,
    maxQueue: options.maxQueue,
    clock,
  });
}

describe("local pacer", () => {
  it("admits synchronously while a slot is free, with no timer", () => {
    const clock = new FakeClock();
    const pacer = pacerOn(clock, { burst: 2 });
    const first = pacer.acquire("reports");
    expect(first).not.toBeInstanceOf(Promise);
    expect(first).toEqual({ ok: true, waitedMs: 0, remaining: 2, resetSeconds: 1 });
    expect(rateLimitValue(first as Admission)).toBe('"default";r=2;t=1');
    expect(rateLimitPolicyValue(10, 1_000)).toBe('"default";q=10;w=1');
    expect(clock.pendingTimers).toBe(0);
  });

  it("admitNow: the admission while a turn is free at once, else nothing decided or queued", async () => {
    const clock = new FakeClock();
    const pacer = pacerOn(clock, { burst: 1 });
    expect(pacer.admitNow!("reports")).toMatchObject({ ok: true, waitedMs: 0 });
    expect(pacer.admitNow!("reports")).toMatchObject({ ok: true, waitedMs: 0 });
    // The burst is spent: not now, and asking queued nobody (the next acquire is first in line).
    expect(pacer.admitNow!("reports")).toBeUndefined();
    expect(pacer.state().queued).toBe(0);
    const waiting = pacer.acquire("reports");
    expect(waiting).toBeInstanceOf(Promise);
    // Someone waits: not now either, even once a slot is free (no overtaking).
    clock.advance(100);
    expect(pacer.admitNow!("reports")).toBeUndefined();
    expect(await waiting).toMatchObject({ ok: true });
    // A pause holds every turn.
    clock.advance(1_000);
    pacer.pause(clock.now() + 500, "429");
    expect(pacer.admitNow!("reports")).toBeUndefined();
    pacer.close();
    expect(pacer.admitNow!("reports")).toBeUndefined();
  });

  it("without a limit, admits everything with one shared answer", () => {
    const pacer = createLocalPacer({ waitMs: 0, clock: new FakeClock() });
    const a = pacer.acquire("x");
    expect(a).toBe(pacer.acquire("y"));
    expect(rateLimitValue(a as Admission)).toBeUndefined();
  });

  it("writes the RateLimit value of every (r, t) alike, the repeated pairs made once", () => {
    const admitted = (remaining: number, resetSeconds: number): Admission => ({
      ok: true,
      waitedMs: 0,
      remaining,
      resetSeconds,
    });
    for (const [r, t] of [
      [0, 1],
      [1, 0],
      [64, 60],
      [65, 1], // past the kept pairs
      [3, 61],
      [0.5, 30], // not whole (a shared pacer's figures come from Redis)
      [0, 30.5],
      [0.5, 0], // would share a slot with the pair above
    ] as const) {
      const expected = `"default";r=${r};t=${t}`;
      expect(rateLimitValue(admitted(r, t))).toBe(expected);
      expect(rateLimitValue(admitted(r, t))).toBe(expected);
    }
    expect(rateLimitValue(admitted(1, 1), "mine")).toBe('"mine";r=1;t=1');
    expect(rateLimitValue(admitted(1, 1))).toBe('"default";r=1;t=1');
  });

  it("lets waiting requests go in arrival order, one per interval", async () => {
    const clock = new FakeClock();
    const pacer = pacerOn(clock);
    const order: number[] = [];
    const waits: number[] = [];
    expect(pacer.acquire("k")).toMatchObject({ ok: true });
    const pending = [1, 2, 3, 4].map((n) =>
      Promise.resolve(pacer.acquire("k")).then((a) => {
        order.push(n);
        if (a.ok) waits.push(a.waitedMs);
      }),
    );
    expect(pacer.state()).toMatchObject({ queued: 4, nextTurnInMs: 100 });
    await clock.advance(250);
    expect(order).toEqual([1, 2]);
    await clock.advance(200);
    await Promise.all(pending);
    expect(order).toEqual([1, 2, 3, 4]);
    expect(waits).toEqual([100, 200, 300, 400]);
    expect(clock.pendingTimers).toBe(0);
  });

  it("answers rate_limited at once with Retry-After when the turn is beyond `wait`", async () => {
    const clock = new FakeClock();
    const pacer = pacerOn(clock, { waitMs: 250 });
    pacer.acquire("k");
    const queued = [pacer.acquire("k"), pacer.acquire("k")];
    expect(queued.every((a) => a instanceof Promise)).toBe(true);
    // Third in line: its turn is 300 ms away, past the 250 ms it may wait.
    const refused = pacer.acquire("k");
    expect(refused).toEqual({ ok: false, code: "rate_limited", retryAfterSeconds: 1 });
    expect(rateLimitValue(refused as Admission)).toBe('"default";r=0;t=1');
    await clock.advance(300);
    expect(await Promise.all(queued)).toMatchObject([{ ok: true }, { ok: true }]);
  });

  it("answers at once with wait 0", () => {
    const pacer = pacerOn(new FakeClock(), { waitMs: 0 });
    pacer.acquire("k");
    expect(pacer.acquire("k")).toEqual({ ok: false, code: "rate_limited", retryAfterSeconds: 1 });
  });

  it("caps the queue", async () => {
    const clock = new FakeClock();
    const pacer = pacerOn(clock, { waitMs: 10_000, maxQueue: 3 });
    pacer.acquire("k");
    const queued = [pacer.acquire("k"), pacer.acquire("k"), pacer.acquire("k")];
    expect(pacer.acquire("k")).toMatchObject({ ok: false, code: "rate_limited" });
    expect(pacer.state().queued).toBe(3);
    await clock.advance(300);
    await Promise.all(queued);
  });

  it("keeps keys independent: a light caller stays fast while a heavy one queues", async () => {
    const clock = new FakeClock();
    const pacer = pacerOn(clock, { waitMs: 10_000 });
    const heavy = Array.from({ length: 20 }, () => pacer.acquire("heavy"));
    expect(heavy.filter((a) => a instanceof Promise)).toHaveLength(19);
    const light = pacer.acquire("light");
    expect(light).toMatchObject({ ok: true, waitedMs: 0 });
    expect(pacer.state()).toMatchObject({ queued: 19, keys: 2 });
    await clock.advance(2_000);
    await Promise.all(heavy);
  });

  it("drops an aborted waiter, and the one behind takes its turn", async () => {
    const clock = new FakeClock();
    const pacer = pacerOn(clock);
    pacer.acquire("k");
    const controller = new AbortController();
    const aborted = pacer.acquire("k", controller.signal) as Promise<Admission>;
    const next = pacer.acquire("k") as Promise<Admission>;
    controller.abort(new Error("client went away"));
    await expect(aborted).rejects.toThrow("client went away");
    await clock.advance(100);
    await expect(next).resolves.toMatchObject({ ok: true, waitedMs: 100 });
  });

  it("asks for the abort signal only when a request has to wait", async () => {
    const clock = new FakeClock();
    const pacer = pacerOn(clock);
    let made = 0;
    const signal = () => {
      made++;
      return new AbortController().signal;
    };
    pacer.acquire("k", signal);
    expect(made).toBe(0);
    const waiting = pacer.acquire("k", signal);
    expect(made).toBe(1);
    await clock.advance(100);
    await waiting;
  });

  it("rejects waiters with PacerClosedError on close", async () => {
    const clock = new FakeClock();
    const pacer = pacerOn(clock);
    pacer.acquire("k");
    const waiting = pacer.acquire("k");
    pacer.close();
    await expect(waiting).rejects.toBeInstanceOf(PacerClosedError);
    expect(clock.pendingTimers).toBe(0);
  });
});
