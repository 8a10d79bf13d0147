/**
 * The deadlines of an upstream's requests waiting in undici's pool queue (`timeouts.queue`), on
 * one timer. A timer per request cost a setTimeout and a clearTimeout on most requests under
 * load: undici checks an idle keep-alive socket in the next check phase before reusing it
 * (client-h1.js `scheduleIdleSocketValidation`), so a request that arrives meanwhile waits in
 * the queue for a moment even when nothing is busy. Every waiter of one upstream waits the same
 * time, so deadlines fall in the order the waiters came: an insertion-ordered Set is the queue,
 * and the one timer is armed for its oldest entry.
 */

export interface QueueWaiter {
  /** `performance.now()` past which the wait is over; set by `QueueDeadlines.add`. */
  queueDeadlineMs: number;
  /** The wait is over and the waiter still queued (it decides whether that is a failure). */
  queueExpired(): void;
}

export class QueueDeadlines {
  private readonly waiting = new Set<QueueWaiter>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly waitMs: number) {}

  /** `waiter` starts waiting now (again, if it was). */
  add(waiter: QueueWaiter): void {
    this.waiting.delete(waiter);
    waiter.queueDeadlineMs = performance.now() + this.waitMs;
    this.waiting.add(waiter);
    if (this.timer === undefined) this.arm(waiter.queueDeadlineMs);
  }

  /** `waiter` got its connection, or stopped waiting. The timer is left for the next waiter. */
  remove(waiter: QueueWaiter): void {
    this.waiting.delete(waiter);
  }

  /** Waiters queued now (tests). */
  get size(): number {
    return this.waiting.size;
  }

  private arm(atMs: number): void {
    // A queued request keeps the process up through its client's socket; the timer need not.
    this.timer = setTimeout(() => this.expire(), Math.max(0, atMs - performance.now())).unref();
  }

  private expire(): void {
    this.timer = undefined;
    const nowMs = performance.now();
    for (const waiter of this.waiting) {
      if (waiter.queueDeadlineMs > nowMs) {
        this.arm(waiter.queueDeadlineMs);
        return;
      }
      this.waiting.delete(waiter);
      waiter.queueExpired();
    }
  }
}
