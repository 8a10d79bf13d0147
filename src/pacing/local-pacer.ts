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

interface KeyState {
  pace: PaceState | undefined;
  queue: Waiter[];
  /** Index of the first unsettled waiter candidate in `queue`. */
  head: number;
  /** Unsettled waiters. */
  waiting: number;
  /** The key's state as it will be once every waiter has gone (valid unless `stale`). */
  shadow: PaceState | undefined;
  stale: boolean;
  timer: unknown;
  timerAtMs: number;
  readonly drain: () => void;
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

export function createLocalPacer(options: LocalPacerOptions): Pacer {
  const clock = options.clock ?? systemClock;
  const params: PaceParams | undefined = options.rate ? paceParams(options.rate) : undefined;
  const pauses = options.pauses ?? privatePauses();
  const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
  const keys = new Map<string, KeyState>();
  let sweepAtKeys = SWEEP_MIN_KEYS;
  let closed = false;
  // Without a limit every request shares one queue: only a pause holds anyone.
  const unlimited = params === undefined ? newKeyState() : undefined;
  const stopWatching = pauses.watch(() => replan());

  function newKeyState(): KeyState {
    const ks: KeyState = {
      pace: params ? createPaceState(params) : undefined,
      queue: [],
      head: 0,
      waiting: 0,
      shadow: undefined,
      stale: false,
      timer: undefined,
      timerAtMs: 0,
      drain: () => drain(ks),
    };
    return ks;
  }

  function keyState(key: string, nowMs: number): KeyState {
    if (unlimited) return unlimited;
    let ks = keys.get(key);
    if (ks === undefined) {
      if (keys.size >= sweepAtKeys) forgetIdleKeys(nowMs);
      ks = newKeyState();
      keys.set(key, ks);
    }
    return ks;
  }

  function forgetIdleKeys(nowMs: number): void {
    for (const [key, ks] of keys) {
      if (ks.waiting === 0 && ks.pace && params && isIdle(ks.pace, params, nowMs)) keys.delete(key);
    }
    sweepAtKeys = Math.max(SWEEP_MIN_KEYS, keys.size * 2);
  }

  /** The key's next turn from `state` at `nowMs`, pauses included. */
  function turnMs(state: PaceState | undefined, nowMs: number, pauseUntilMs: number): number {
    const start = state && params ? earliestStartMs(state, params, nowMs) : nowMs;
    return start > pauseUntilMs ? start : pauseUntilMs;
  }

  function admitted(ks: KeyState, atMs: number, waitedMs: number): Admission {
    if (!ks.pace || !params) return waitedMs === 0 ? FREE : { ...FREE, waitedMs };
    const remaining = admitAt(ks.pace, params, atMs);
    const fullInMs = fullAgainAtMs(ks.pace, params) - atMs;
    return { ok: true, waitedMs, remaining, resetSeconds: Math.max(0, Math.ceil(fullInMs / 1000)) };
  }

  /** The shadow state: the key's state once every waiter has gone (rebuilt when stale). */
  function shadowOf(ks: KeyState, nowMs: number): PaceState {
    if (ks.shadow !== undefined && !ks.stale && ks.waiting > 0) return ks.shadow;
    const real = ks.pace!;
    const shadow: PaceState = { ...real, log: real.log?.slice() };
    const pauseUntilMs = pauses.untilMs(nowMs);
    for (let i = ks.head; i < ks.queue.length; i++) {
      if (ks.queue[i]!.settled) continue;
      admitAt(shadow, params!, turnMs(shadow, nowMs, pauseUntilMs));
    }
    ks.shadow = shadow;
    ks.stale = false;
    return shadow;
  }

  function settle(ks: KeyState, waiter: Waiter, outcome: Admission | Error): void {
    if (waiter.settled) return;
    waiter.settled = true;
    ks.waiting--;
    if (waiter.onAbort) waiter.signal?.removeEventListener("abort", waiter.onAbort);
    if (outcome instanceof Error) waiter.reject(outcome);
    else waiter.resolve(outcome);
  }

  function peek(ks: KeyState): Waiter | undefined {
    while (ks.head < ks.queue.length && ks.queue[ks.head]!.settled) ks.head++;
    if (ks.head === ks.queue.length) {
      ks.queue.length = 0;
      ks.head = 0;
      return undefined;
    }
    // Drop the settled prefix now and then so the array does not grow forever.
    if (ks.head > 64 && ks.head * 2 > ks.queue.length) {
      ks.queue.splice(0, ks.head);
      ks.head = 0;
    }
    return ks.queue[ks.head];
  }

  /** Lets every head whose turn has come go, refuses those past their wait, sets the timer. */
  function drain(ks: KeyState): void {
    ks.timer = undefined;
    for (;;) {
      const waiter = peek(ks);
      if (waiter === undefined) return;
      const nowMs = clock.now();
      const pauseUntilMs = pauses.untilMs(nowMs);
      const at = turnMs(ks.pace, nowMs, pauseUntilMs);
      if (at > waiter.deadlineMs) {
        ks.stale = true;
        settle(ks, waiter, refusal(nowMs, at, pauseUntilMs, waiter.deadlineMs));
        continue;
      }
      if (at <= nowMs) {
        settle(ks, waiter, admitted(ks, nowMs, nowMs - waiter.arrivalMs));
        continue;
      }
      ks.timerAtMs = at;
      ks.timer = clock.setTimeout(ks.drain, at - nowMs);
      return;
    }
  }

  function refusal(nowMs: number, at: number, pauseUntilMs: number, deadlineMs: number) {
    return pauseUntilMs > deadlineMs
      ? rejection("upstream_rate_limited", pauseUntilMs - nowMs)
      : rejection("rate_limited", at - nowMs);
  }

  function wait(
    ks: KeyState,
    nowMs: number,
    deadlineMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Admission> {
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
          ks.stale = true;
          settle(ks, waiter, waitError(signal.reason));
        };
        signal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      ks.queue.push(waiter);
      ks.waiting++;
      if (ks.timer === undefined) drain(ks);
    });
  }

  function acquire(
    key: string,
    signal?: WaitSignal,
    waitMs: number = options.waitMs,
    park?: ParkRequest,
  ): Admission | Promise<Admission> {
    if (closed) return Promise.reject(new PacerClosedError());
    const nowMs = clock.now();
    const pauseUntilMs = pauses.untilMs(nowMs);
    const ks = keyState(key, nowMs);
    if (ks.waiting === 0) {
      const at = turnMs(ks.pace, nowMs, pauseUntilMs);
      if (at <= nowMs) return admitted(ks, nowMs, 0);
    }
    // Where a new waiter would stand: after everyone already waiting.
    const shadow = ks.pace ? shadowOf(ks, nowMs) : undefined;
    const at = turnMs(shadow, nowMs, pauseUntilMs);
    if (at - nowMs > waitMs) return refusal(nowMs, at, pauseUntilMs, nowMs + waitMs);
    if (ks.waiting >= maxQueue) return rejection("rate_limited", at - nowMs);
    // No place among the waiting (limits.maxWaiting, maxWaitingPerCaller): no wait at all.
    if (park !== undefined && !park()) return rejection("rate_limited", at - nowMs);
    const abortSignal = resolveSignal(signal);
    if (abortSignal?.aborted) return Promise.reject(waitError(abortSignal.reason));
    if (shadow && params) admitAt(shadow, params, at);
    return wait(ks, nowMs, nowMs + waitMs, abortSignal);
  }

  function pause(untilMs: number, reason: PauseReason): void {
    // The table tells every pacer the pause holds (this one included): each re-plans.
    pauses.pause(untilMs, reason);
  }

  /** A pause began: re-plan every queue now, so those who can't outlast it are told at once. */
  function replan(): void {
    if (closed) return;
    const all = unlimited ? [unlimited] : keys.values();
    for (const ks of all) {
      if (ks.waiting === 0) continue;
      ks.stale = true;
      if (ks.timer !== undefined) clock.clearTimeout(ks.timer);
      ks.timer = undefined;
      refuseThoseOutlastedByPause(ks);
      drain(ks);
    }
  }

  function refuseThoseOutlastedByPause(ks: KeyState): void {
    const nowMs = clock.now();
    const pauseUntilMs = pauses.untilMs(nowMs);
    for (let i = ks.head; i < ks.queue.length; i++) {
      const waiter = ks.queue[i]!;
      if (!waiter.settled && waiter.deadlineMs < pauseUntilMs) {
        settle(ks, waiter, rejection("upstream_rate_limited", pauseUntilMs - nowMs));
      }
    }
  }

  function state(): PacerState {
    const nowMs = clock.now();
    let queued = 0;
    let nextTurnMs = Number.POSITIVE_INFINITY;
    for (const ks of unlimited ? [unlimited] : keys.values()) {
      queued += ks.waiting;
      if (ks.timer !== undefined && ks.timerAtMs < nextTurnMs) nextTurnMs = ks.timerAtMs;
    }
    const pauseUntilMs = pauses.untilMs(nowMs);
    return {
      scope: "local",
      queued,
      keys: unlimited ? 0 : keys.size,
      nextTurnInMs: Number.isFinite(nextTurnMs) ? Math.max(0, nextTurnMs - nowMs) : 0,
      pausedForMs: pauseUntilMs > 0 ? pauseUntilMs - nowMs : 0,
      pauseReason: pauses.reason(nowMs),
      degraded: false,
    };
  }

  function close(): void {
    if (closed) return;
    closed = true;
    stopWatching();
    for (const ks of unlimited ? [unlimited] : keys.values()) {
      if (ks.timer !== undefined) clock.clearTimeout(ks.timer);
      ks.timer = undefined;
      for (let i = ks.head; i < ks.queue.length; i++) {
        settle(ks, ks.queue[i]!, new PacerClosedError());
      }
      ks.queue.length = 0;
      ks.head = 0;
    }
    keys.clear();
  }

  return { acquire, pause, state, close };
}
