/**
 * The per-replica pacer: GCRA with a window cap (gcra.ts) per key, and a FIFO queue per key for
 * requests over the limit (key-queue.ts). The fast path — a free slot and nobody waiting — is
 * one synchronous call that allocates only the admission. Keys of callers idle long enough are
 * forgotten; a pause re-plans every queue at once.
 */
import { type Clock, systemClock } from "../base/clock.js";
import { type PaceRate, paceParams } from "./gcra.js";
import { KeyQueue, type PaceRules, refusal } from "./key-queue.js";
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

/** Keys are counted for forgetting idle ones only beyond this many (`by: caller`). */
const SWEEP_MIN_KEYS = 1_024;

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
    const free = freeTurn(ks, nowMs, pauseUntilMs);
    if (free !== undefined) return free;
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

  admitNow(key: string): Admission | undefined {
    if (this.closed) return undefined;
    const nowMs = this.rules.clock.now();
    return freeTurn(this.keyQueue(key, nowMs), nowMs, this.rules.pauses.untilMs(nowMs));
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

/** The admission when `ks` has a turn free at `nowMs` (nobody waiting, no pause), else none. */
function freeTurn(ks: KeyQueue, nowMs: number, pauseUntilMs: number): Admission | undefined {
  if (ks.waiting === 0 && ks.turnNowMs(nowMs, pauseUntilMs) <= nowMs) return ks.admitted(nowMs, 0);
  return undefined;
}
