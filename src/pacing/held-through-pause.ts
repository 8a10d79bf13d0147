/**
 * Requests of the shared pacer that wait out an upstream's pause before they book a turn in
 * Redis: held per key in arrival order, and all released when the pause ends (a pause set or
 * lengthened meanwhile moves the end).
 */
import type { Clock } from "../base/clock.js";
import type { EntryPauses } from "./pause.js";

/** What the hold needs of a waiting request. */
export interface HeldRequest {
  key: string;
  arrivalMs: number;
  phase: "held" | "asking" | "sleeping";
  settled: boolean;
}

/**
 * Requests waiting out a pause before they book, per key, in arrival order; when the pause is
 * over each is handed to `release` (to book its turn).
 */
export class HeldThroughPause<Waiter extends HeldRequest> {
  private readonly held = new Map<string, Waiter[]>();
  private timer: unknown;

  constructor(
    private readonly clock: Clock,
    private readonly pauses: EntryPauses,
    private readonly release: (waiter: Waiter) => void,
  ) {}

  /** Requests of `key` held now. */
  count(key: string): number {
    return this.held.get(key)?.length ?? 0;
  }

  /** Keeps a waiter until the pause ends, in arrival order. */
  hold(waiter: Waiter): void {
    waiter.phase = "held";
    let queue = this.held.get(waiter.key);
    if (queue === undefined) {
      queue = [];
      this.held.set(waiter.key, queue);
    }
    // A waiter back from a turn that fell in the pause arrived before later ones: keep the order.
    let index = queue.length;
    while (index > 0 && queue[index - 1]!.arrivalMs > waiter.arrivalMs) index--;
    queue.splice(index, 0, waiter);
    this.arm();
  }

  /** The pause was set or lengthened: wait for its new end. */
  rearm(): void {
    if (this.held.size > 0) this.arm();
  }

  clear(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.held.clear();
  }

  private arm(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    const nowMs = this.clock.now();
    const untilMs = this.pauses.untilMs(nowMs);
    this.timer = this.clock.setTimeout(() => this.releaseAll(), Math.max(0, untilMs - nowMs));
  }

  /** The pause is over: every held waiter books its turn, in arrival order. */
  private releaseAll(): void {
    this.timer = undefined;
    if (this.pauses.untilMs(this.clock.now()) > 0) {
      this.arm();
      return;
    }
    const queues = [...this.held.values()];
    this.held.clear();
    for (const queue of queues) {
      for (const waiter of queue) if (!waiter.settled) this.release(waiter);
    }
  }
}
