/**
 * One budget of the local pacer (a key: the upstream, or one caller with `by: caller`): its GCRA
 * state and its FIFO queue of requests over the limit. The fast path — a free slot and nobody
 * waiting — allocates only the admission; promises and timers exist only while someone waits,
 * one unref'd timer per key, set for the head's turn.
 *
 * A new waiter's turn is projected on arrival by running the rules ahead on a copy of the key's
 * state ("shadow"), so one that cannot go within its wait is answered at once with an honest
 * Retry-After instead of waiting only to be refused. The head is checked again when its turn
 * comes (a pause, or a clock that moved differently, may have changed things).
 */
import type { Clock } from "../base/clock.js";
import {
  admitAt,
  createPaceState,
  earliestStartMs,
  fullAgainAtMs,
  isIdle,
  type PaceParams,
  type PaceState,
} from "./gcra.js";
import { type Admission, PacerClosedError, rejection, waitError } from "./limiter.js";
import type { EntryPauses } from "./pause.js";

interface Waiter {
  arrivalMs: number;
  deadlineMs: number;
  settled: boolean;
  resolve: (admission: Admission) => void;
  reject: (err: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/** What every budget of one pacer shares: its clock, its limit and its pauses. */
export interface PaceRules {
  readonly clock: Clock;
  /** Undefined: no limit of our own, only the upstream's pauses hold requests. */
  readonly params: PaceParams | undefined;
  readonly pauses: EntryPauses;
}

/** The admission when there is no limit and no pause: shared, never changed. */
const FREE: Extract<Admission, { ok: true }> = Object.freeze({
  ok: true as const,
  waitedMs: 0,
  remaining: Number.POSITIVE_INFINITY,
  resetSeconds: 0,
});

/** A budget's next turn from `state` at `nowMs`, pauses included. */
function turnMs(
  params: PaceParams | undefined,
  state: PaceState | undefined,
  nowMs: number,
  pauseUntilMs: number,
): number {
  const start = state && params ? earliestStartMs(state, params, nowMs) : nowMs;
  return start > pauseUntilMs ? start : pauseUntilMs;
}

export function refusal(nowMs: number, at: number, pauseUntilMs: number, deadlineMs: number) {
  return pauseUntilMs > deadlineMs
    ? rejection("upstream_rate_limited", pauseUntilMs - nowMs)
    : rejection("rate_limited", at - nowMs);
}

/**
 * One budget (a key): its GCRA state and its FIFO queue of waiting requests, with one timer set
 * for the head's turn.
 */
export class KeyQueue {
  readonly pace: PaceState | undefined;
  /** Unsettled waiters. */
  waiting = 0;
  private readonly queue: Waiter[] = [];
  /** Index of the first unsettled waiter candidate in `queue`. */
  private head = 0;
  /** The key's state as it will be once every waiter has gone (valid unless `stale`). */
  private shadow: PaceState | undefined;
  private stale = false;
  private timer: unknown;
  private timerAtMs = 0;
  private readonly drainLater = () => this.drain();

  constructor(private readonly rules: PaceRules) {
    this.pace = rules.params ? createPaceState(rules.params) : undefined;
  }

  /** Monotonic ms the head's timer is set for, while it runs. */
  get nextTurnAtMs(): number | undefined {
    return this.timer === undefined ? undefined : this.timerAtMs;
  }

  /** Nobody waits and the budget is full again: the key can be forgotten. */
  isIdle(nowMs: number): boolean {
    const { params } = this.rules;
    return this.waiting === 0 && this.pace !== undefined && params !== undefined
      ? isIdle(this.pace, params, nowMs)
      : false;
  }

  /** This budget's turn if nobody waited, pauses included. */
  turnNowMs(nowMs: number, pauseUntilMs: number): number {
    return turnMs(this.rules.params, this.pace, nowMs, pauseUntilMs);
  }

  admitted(atMs: number, waitedMs: number): Admission {
    const { params } = this.rules;
    if (!this.pace || !params) return waitedMs === 0 ? FREE : { ...FREE, waitedMs };
    const remaining = admitAt(this.pace, params, atMs);
    const fullInMs = fullAgainAtMs(this.pace, params) - atMs;
    return { ok: true, waitedMs, remaining, resetSeconds: Math.max(0, Math.ceil(fullInMs / 1000)) };
  }

  /** Where a new waiter would stand: after everyone already waiting (the shadow state). */
  projectedTurnMs(nowMs: number, pauseUntilMs: number): number {
    const shadow = this.pace ? this.shadowOf(nowMs) : undefined;
    return turnMs(this.rules.params, shadow, nowMs, pauseUntilMs);
  }

  /** The new waiter projected last will stand at `atMs`: the shadow state counts its turn. */
  bookShadow(atMs: number): void {
    const { params } = this.rules;
    if (this.shadow !== undefined && params) admitAt(this.shadow, params, atMs);
  }

  wait(nowMs: number, deadlineMs: number, signal: AbortSignal | undefined): Promise<Admission> {
    return new Promise<Admission>((resolve, reject) => {
      const waiter: Waiter = {
        arrivalMs: nowMs,
        deadlineMs,
        settled: false,
        resolve,
        reject,
        signal,
        onAbort: undefined,
      };
      if (signal) {
        waiter.onAbort = () => {
          this.stale = true;
          this.settle(waiter, waitError(signal.reason));
        };
        signal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      this.queue.push(waiter);
      this.waiting++;
      if (this.timer === undefined) this.drain();
    });
  }

  /** A pause began: refuse those who can't outlast it now, and look at the head again. */
  replan(): void {
    if (this.waiting === 0) return;
    this.stale = true;
    this.clearTimer();
    const nowMs = this.rules.clock.now();
    const pauseUntilMs = this.rules.pauses.untilMs(nowMs);
    for (let i = this.head; i < this.queue.length; i++) {
      const waiter = this.queue[i]!;
      if (!waiter.settled && waiter.deadlineMs < pauseUntilMs) {
        this.settle(waiter, rejection("upstream_rate_limited", pauseUntilMs - nowMs));
      }
    }
    this.drain();
  }

  /** Stops the timer and rejects every waiter with PacerClosedError. */
  close(): void {
    this.clearTimer();
    for (let i = this.head; i < this.queue.length; i++) {
      this.settle(this.queue[i]!, new PacerClosedError());
    }
    this.queue.length = 0;
    this.head = 0;
  }

  /** The shadow state: the key's state once every waiter has gone (rebuilt when stale). */
  private shadowOf(nowMs: number): PaceState {
    if (this.shadow !== undefined && !this.stale && this.waiting > 0) return this.shadow;
    const real = this.pace!;
    const shadow: PaceState = { ...real, log: real.log?.slice() };
    const pauseUntilMs = this.rules.pauses.untilMs(nowMs);
    for (let i = this.head; i < this.queue.length; i++) {
      if (this.queue[i]!.settled) continue;
      admitAt(shadow, this.rules.params!, turnMs(this.rules.params, shadow, nowMs, pauseUntilMs));
    }
    this.shadow = shadow;
    this.stale = false;
    return shadow;
  }

  private settle(waiter: Waiter, outcome: Admission | Error): void {
    if (waiter.settled) return;
    waiter.settled = true;
    this.waiting--;
    if (waiter.onAbort) waiter.signal?.removeEventListener("abort", waiter.onAbort);
    if (outcome instanceof Error) waiter.reject(outcome);
    else waiter.resolve(outcome);
  }

  private peek(): Waiter | undefined {
    while (this.head < this.queue.length && this.queue[this.head]!.settled) this.head++;
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
      return undefined;
    }
    // Drop the settled prefix now and then so the array does not grow forever.
    if (this.head > 64 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    return this.queue[this.head];
  }

  /** Lets every head whose turn has come go, refuses those past their wait, sets the timer. */
  private drain(): void {
    this.timer = undefined;
    const { clock, pauses } = this.rules;
    for (;;) {
      const waiter = this.peek();
      if (waiter === undefined) return;
      const nowMs = clock.now();
      const pauseUntilMs = pauses.untilMs(nowMs);
      const at = this.turnNowMs(nowMs, pauseUntilMs);
      if (at > waiter.deadlineMs) {
        this.stale = true;
        this.settle(waiter, refusal(nowMs, at, pauseUntilMs, waiter.deadlineMs));
        continue;
      }
      if (at <= nowMs) {
        this.settle(waiter, this.admitted(nowMs, nowMs - waiter.arrivalMs));
        continue;
      }
      this.timerAtMs = at;
      this.timer = clock.setTimeout(this.drainLater, at - nowMs);
      return;
    }
  }

  private clearTimer(): void {
    if (this.timer !== undefined) this.rules.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }
}
