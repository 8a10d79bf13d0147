/**
 * The deadlines of an upstream's requests waiting in undici's pool queue (`timeouts.queue`), on
 * one timer. A timer per request cost a setTimeout and a clearTimeout on most requests under
 * load: undici checks an idle keep-alive socket in the next check phase before reusing it
 * (client-h1.js `scheduleIdleSocketValidation`), so a request that arrives meanwhile waits in
 * the queue for a moment even when nothing is busy. Every waiter of one upstream waits the same
 * time, so deadlines fall in the order the waiters came: a FIFO list is the queue, and the one
 * timer is armed for its oldest entry.
 *
 * The list is intrusive (the waiters carry its links): a JS Set as the queue measured six times
 * the plain request's GC time (Node 24), since V8 re-allocates a Set's table each time it grows
 * from empty and shrinks back — which this queue does between most requests.
 */

export interface QueueWaiter {
  /** `performance.now()` past which the wait is over; set by `QueueDeadlines.add`. */
  queueDeadlineMs: number;
  /** The list's links, kept by QueueDeadlines alone (undefined when not queued or at an end). */
  queuePrev: QueueWaiter | undefined;
  queueNext: QueueWaiter | undefined;
  /** The wait is over and the waiter still queued (it decides whether that is a failure). */
  queueExpired(): void;
}

export class QueueDeadlines {
  private head: QueueWaiter | undefined;
  private tail: QueueWaiter | undefined;
  private count = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly waitMs: number) {}

  /** `waiter` starts waiting now; it must not be queued already (`remove` it first). */
  add(waiter: QueueWaiter): void {
    waiter.queueDeadlineMs = performance.now() + this.waitMs;
    waiter.queuePrev = this.tail;
    waiter.queueNext = undefined;
    if (this.tail === undefined) this.head = waiter;
    else this.tail.queueNext = waiter;
    this.tail = waiter;
    this.count++;
    if (this.timer === undefined) this.arm(waiter.queueDeadlineMs);
  }

  /**
   * `waiter`, queued here, got its connection or stopped waiting. The timer is left running:
   * when it fires it re-arms for the oldest waiter left, or stops if there is none.
   */
  remove(waiter: QueueWaiter): void {
    const { queuePrev: prev, queueNext: next } = waiter;
    if (prev === undefined) this.head = next;
    else prev.queueNext = next;
    if (next === undefined) this.tail = prev;
    else next.queuePrev = prev;
    waiter.queuePrev = undefined;
    waiter.queueNext = undefined;
    this.count--;
  }

  /** Waiters queued now (tests). */
  get size(): number {
    return this.count;
  }

  private arm(atMs: number): void {
    // An expiry can add a waiter before the loop re-arms (a failed request's connection starts
    // its next pipelined request at once): one timer, always for the oldest waiter.
    if (this.timer !== undefined) clearTimeout(this.timer);
    // A queued request keeps the process up through its client's socket; the timer need not.
    this.timer = setTimeout(() => this.expire(), Math.max(0, atMs - performance.now())).unref();
  }

  private expire(): void {
    this.timer = undefined;
    const nowMs = performance.now();
    for (let waiter = this.head; waiter !== undefined; waiter = this.head) {
      if (waiter.queueDeadlineMs > nowMs) {
        this.arm(waiter.queueDeadlineMs);
        return;
      }
      this.remove(waiter);
      waiter.queueExpired();
    }
  }
}
