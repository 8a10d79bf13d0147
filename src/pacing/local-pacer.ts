/**
 * The per-replica pacer: GCRA with a window cap (gcra.ts) per key, and a FIFO queue per key for
 * requests over the limit. The fast path — a free slot and nobody waiting — is one synchronous
 * call that allocates only the admission; promises and timers exist only while someone waits,
 * one unref'd timer per key, set for the head's turn.
 *
 * A new waiter's turn is projected on arrival by running the rules ahead on a copy of the key's
 * state ("shadow"), so one that cannot go within its wait is answered at once with an honest
 * Retry-After instead of waiting only to be refused. The head is checked again when its turn
 * comes (a pause, or a clock that moved differently, may have changed things).
 */
import { type Clock, systemClock } from "../base/clock.js";
import {
  admitAt,
  createPaceState,
  earliestStartMs,
  fullAgainAtMs,
  isIdle,
  type PaceParams,
  type PaceRate,
  type PaceState,
  paceParams,
} from "./gcra.js";
import {
  type Admission,
  DEFAULT_MAX_QUEUE,
  type Pacer,
  PacerClosedError,
  type PacerState,
  type ParkRequest,
  rejection,
  resolveSignal,
  type WaitSignal,
  waitError,
} from "./limiter.js";
import { type EntryPauses, type PauseReason, privatePauses } from "./pause.js";

export interface LocalPacerOptions {
  /** The limit; undefined: none of our own, only the upstream's pauses hold requests. */
  rate?: PaceRate | undefined;
  /** Longest a request waits for its turn, in ms; 0: answer at once. */
  waitMs: number;
  /** Most requests waiting per key (default 1000); beyond: 429 `rate_limited` at once. */
  maxQueue?: number | undefined;
  /** The pauses holding this pacer's entry (default: its own, shared with no one). */
  pauses?: EntryPauses | undefined;
  clock?: Clock | undefined;
}

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
interface PaceRules {
  readonly clock: Clock;
  /** Undefined: no limit of our own, only the upstream's pauses hold requests. */
  readonly params: PaceParams | undefined;
  readonly pauses: EntryPauses;
}

/** Keys are counted for forgetting idle ones only beyond this many (`by: caller`). */
const SWEEP_MIN_KEYS = 1_024;

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

function refusal(nowMs: number, at: number, pauseUntilMs: number, deadlineMs: number) {
  return pauseUntilMs > deadlineMs
    ? rejection("upstream_rate_limited", pauseUntilMs - nowMs)
    : rejection("rate_limited", at - nowMs);
}

/**
 * One budget (a key): its GCRA state and its FIFO queue of waiting requests, with one timer set
 * for the head's turn.
 */
class KeyQueue {
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

export function createLocalPacer(options: LocalPacerOptions): Pacer {
  return new LocalPacer(options);
}

/** The per-replica pacer: one KeyQueue per budget (one for all when there is no limit). */
export class LocalPacer implements Pacer {
  private readonly rules: PaceRules;
  private readonly maxQueue: number;
  private readonly keys = new Map<string, KeyQueue>();
  /** Without a limit every request shares one queue: only a pause holds anyone. */
  private readonly unlimited: KeyQueue | undefined;
  private readonly stopWatching: () => void;
  private sweepAtKeys = SWEEP_MIN_KEYS;
  private closed = false;

  constructor(private readonly options: LocalPacerOptions) {
    this.rules = {
      clock: options.clock ?? systemClock,
      params: options.rate ? paceParams(options.rate) : undefined,
      pauses: options.pauses ?? privatePauses(),
    };
    this.maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
    this.unlimited = this.rules.params === undefined ? new KeyQueue(this.rules) : undefined;
    this.stopWatching = this.rules.pauses.watch(() => this.replan());
  }

  acquire(
    key: string,
    signal?: WaitSignal,
    waitMs: number = this.options.waitMs,
    park?: ParkRequest,
  ): Admission | Promise<Admission> {
    if (this.closed) return Promise.reject(new PacerClosedError());
    const nowMs = this.rules.clock.now();
    const pauseUntilMs = this.rules.pauses.untilMs(nowMs);
    const ks = this.keyQueue(key, nowMs);
    if (ks.waiting === 0 && ks.turnNowMs(nowMs, pauseUntilMs) <= nowMs) {
      return ks.admitted(nowMs, 0);
    }
    const at = ks.projectedTurnMs(nowMs, pauseUntilMs);
    if (at - nowMs > waitMs) return refusal(nowMs, at, pauseUntilMs, nowMs + waitMs);
    if (ks.waiting >= this.maxQueue) return rejection("rate_limited", at - nowMs);
    // No place among the waiting (limits.maxWaiting, maxWaitingPerCaller): no wait at all.
    if (park !== undefined && !park()) return rejection("rate_limited", at - nowMs);
    const abortSignal = resolveSignal(signal);
    if (abortSignal?.aborted) return Promise.reject(waitError(abortSignal.reason));
    ks.bookShadow(at);
    return ks.wait(nowMs, nowMs + waitMs, abortSignal);
  }

  pause(untilMs: number, reason: PauseReason): void {
    // The table tells every pacer the pause holds (this one included): each re-plans.
    this.rules.pauses.pause(untilMs, reason);
  }

  state(): PacerState {
    const { clock, pauses } = this.rules;
    const nowMs = clock.now();
    let queued = 0;
    let nextTurnMs = Number.POSITIVE_INFINITY;
    for (const ks of this.all()) {
      queued += ks.waiting;
      const at = ks.nextTurnAtMs;
      if (at !== undefined && at < nextTurnMs) nextTurnMs = at;
    }
    const pauseUntilMs = pauses.untilMs(nowMs);
    return {
      scope: "local",
      queued,
      keys: this.unlimited ? 0 : this.keys.size,
      nextTurnInMs: Number.isFinite(nextTurnMs) ? Math.max(0, nextTurnMs - nowMs) : 0,
      pausedForMs: pauseUntilMs > 0 ? pauseUntilMs - nowMs : 0,
      pauseReason: pauses.reason(nowMs),
      degraded: false,
    };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stopWatching();
    for (const ks of this.all()) ks.close();
    this.keys.clear();
  }

  private all(): Iterable<KeyQueue> {
    return this.unlimited ? [this.unlimited] : this.keys.values();
  }

  private keyQueue(key: string, nowMs: number): KeyQueue {
    if (this.unlimited) return this.unlimited;
    let ks = this.keys.get(key);
    if (ks === undefined) {
      if (this.keys.size >= this.sweepAtKeys) this.forgetIdleKeys(nowMs);
      ks = new KeyQueue(this.rules);
      this.keys.set(key, ks);
    }
    return ks;
  }

  private forgetIdleKeys(nowMs: number): void {
    for (const [key, ks] of this.keys) if (ks.isIdle(nowMs)) this.keys.delete(key);
    this.sweepAtKeys = Math.max(SWEEP_MIN_KEYS, this.keys.size * 2);
  }

  /** A pause began: re-plan every queue now, so those who can't outlast it are told at once. */
  private replan(): void {
    if (this.closed) return;
    for (const ks of this.all()) ks.replan();
  }
}
