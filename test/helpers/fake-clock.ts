import type { Clock } from "../../src/base/clock.js";

interface FakeTimer {
  atMs: number;
  seq: number;
  fn: () => void;
}

/**
 * A controllable clock: time moves only in advance(), which fires due timers in order and lets
 * promise chains settle between them.
 */
export class FakeClock implements Clock {
  private nowMs = 0;
  private seq = 0;
  private readonly timers = new Map<number, FakeTimer>();
  readonly wallStartMs = Date.UTC(2026, 10, 22, 12, 0, 0);

  now(): number {
    return this.nowMs;
  }

  wallNow(): number {
    return this.wallStartMs + this.nowMs;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { atMs: this.nowMs + Math.max(0, ms), seq: id, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  /** Number of timers set and not yet fired or cleared. */
  get pendingTimers(): number {
    return this.timers.size;
  }

  /** Monotonic time of the earliest pending timer. */
  nextTimerAt(): number | undefined {
    let earliest: number | undefined;
    for (const timer of this.timers.values()) {
      if (earliest === undefined || timer.atMs < earliest) earliest = timer.atMs;
    }
    return earliest;
  }

  /** Move time forward by ms, firing every timer due on the way. */
  async advance(ms: number): Promise<void> {
    const targetMs = this.nowMs + ms;
    for (;;) {
      await settle();
      const due = [...this.timers.entries()]
        .filter(([, t]) => t.atMs <= targetMs)
        .sort(([, a], [, b]) => a.atMs - b.atMs || a.seq - b.seq)[0];
      if (!due) break;
      this.timers.delete(due[0]);
      this.nowMs = Math.max(this.nowMs, due[1].atMs);
      due[1].fn();
    }
    this.nowMs = targetMs;
    await settle();
  }

  /** Advance to the next pending timer and fire it (and any others due at that moment). */
  async advanceToNextTimer(): Promise<number> {
    await settle();
    const at = this.nextTimerAt();
    if (at === undefined) throw new Error("no pending timer");
    await this.advance(Math.max(0, at - this.nowMs));
    return at;
  }
}

/** Let pending promise callbacks and I/O callbacks run. */
export async function settle(rounds = 3): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
