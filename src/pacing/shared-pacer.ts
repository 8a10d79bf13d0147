/**
 * The pacer shared by all replicas (`rateLimit.scope: shared`): each request books its turn in
 * Redis with one script call (gcra-script.ts RESERVE), which answers how long to wait, and then
 * waits on this replica's clock. Turns are booked in the order requests reach Redis, so waiting
 * is FIFO across replicas, bounded by `wait`, and needs no polling. Every request costs one
 * Redis round trip: the synchronous fast path is the local pacer's alone.
 *
 * Pauses stay per replica (the upstream answered this replica) and follow the entry's
 * `pauseScope` as a local pacer's do (pause.ts): while one runs, requests wait here in arrival
 * order, before booking, and book their turns when it ends. A booked turn that falls inside a
 * pause, or whose request went away, is given back (REFUND). A request held past now (a pause,
 * a booked turn later than now) first asks for a place among the waiting (`park`); refused, it
 * is answered 429 at once and its turn, if booked, given back.
 *
 * Redis trouble never fails a request: a failed or slow call (commandTimeoutMs) makes this
 * replica pace alone for a second (`degraded` in state()), as the shared token cache falls back
 * to fetching locally. Alone, a replica takes `aloneShare` of the rate: the default, the whole
 * rate, keeps every replica's traffic flowing but lets N replicas send up to N times the limit
 * during an outage; 1/N keeps the limit at the cost of throughput.
 */
import { type Clock, systemClock } from "../base/clock.js";
import { type PaceParams, type PaceRate, paceParams } from "./gcra.js";
import { type Reservation, scriptRate } from "./gcra-script.js";
import { HeldThroughPause } from "./held-through-pause.js";
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
import { createLocalPacer } from "./local-pacer.js";
import { type PacingRedis, PacingScripts } from "./pacing-scripts.js";
import { type EntryPauses, type PauseReason, privatePauses } from "./pause.js";

export type { PacingRedis };

export interface SharedPacerOptions {
  rate: PaceRate;
  /** Longest a request waits for its turn, in ms; 0: answer at once. */
  waitMs: number;
  /** Most requests waiting per key on this replica (default 1000). */
  maxQueue?: number | undefined;
  /** The client, or undefined while none is connected (then this replica paces alone). */
  redis: () => PacingRedis | undefined;
  /** Prepended to the keys, e.g. `<tokenCache.redis.keyPrefix>pace:<upstream>:`. */
  keyPrefix: string;
  /**
   * The share of the rate this replica takes while pacing alone (0 < share ≤ 1, default 1).
   */
  aloneShare?: number | undefined;
  /**
   * Longest a script call may take before this replica paces alone (default 500 ms, like
   * `tokenCache.redis.commandTimeout`). Under CPU starvation event-loop lag alone can reach it.
   */
  commandTimeoutMs?: number | undefined;
  /** How long to pace alone after a Redis failure before trying Redis again (default 1 s). */
  retryRedisAfterMs?: number | undefined;
  /** Told about each Redis failure (to log it). */
  onRedisError?: ((err: unknown) => void) | undefined;
  /** The pauses holding this pacer's entry (default: its own, shared with no one). */
  pauses?: EntryPauses | undefined;
  clock?: Clock | undefined;
}

interface Waiter {
  key: string;
  arrivalMs: number;
  deadlineMs: number;
  phase: "held" | "asking" | "sleeping";
  settled: boolean;
  /** Set while sleeping towards a booked turn. */
  timer: unknown;
  wakeAtMs: number;
  booked: Extract<Reservation, { granted: true }> | undefined;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  /** Asked before the request is held past now; undefined: it may always wait. */
  park: ParkRequest | undefined;
  resolve: (admission: Admission) => void;
  reject: (err: unknown) => void;
}

export function createSharedPacer(options: SharedPacerOptions): Pacer {
  return new SharedPacer(options);
}

export class SharedPacer implements Pacer {
  private readonly clock: Clock;
  private readonly params: PaceParams;
  private readonly pauses: EntryPauses;
  private readonly maxQueue: number;
  private readonly retryRedisAfterMs: number;
  private readonly scripts: PacingScripts;
  /** Paces this replica while Redis is away; shares the pauses. */
  private readonly alone: Pacer;
  private readonly waiters = new Set<Waiter>();
  private readonly waitingByKey = new Map<string, number>();
  private readonly held: HeldThroughPause<Waiter>;
  private readonly stopWatching: () => void;
  private redisBackAtMs = 0;
  private closed = false;

  constructor(private readonly options: SharedPacerOptions) {
    this.clock = options.clock ?? systemClock;
    this.params = paceParams(options.rate);
    this.pauses = options.pauses ?? privatePauses();
    this.maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
    this.retryRedisAfterMs = options.retryRedisAfterMs ?? 1_000;
    this.scripts = new PacingScripts(
      options.redis,
      this.clock,
      options.keyPrefix,
      scriptRate(this.params),
      options.commandTimeoutMs ?? 500,
    );
    const aloneShare = Math.min(1, Math.max(options.aloneShare ?? 1, 1e-6));
    this.alone = createLocalPacer({
      rate: { ...options.rate, perMs: options.rate.perMs / aloneShare },
      waitMs: options.waitMs,
      maxQueue: this.maxQueue,
      pauses: this.pauses,
      clock: this.clock,
    });
    this.held = new HeldThroughPause(this.clock, this.pauses, (waiter) => this.reserve(waiter));
    this.stopWatching = this.pauses.watch(() => this.replan());
  }

  acquire(
    key: string,
    signal?: WaitSignal,
    waitMs: number = this.options.waitMs,
    park?: ParkRequest,
  ): Admission | Promise<Admission> {
    if (this.closed) return Promise.reject(new PacerClosedError());
    const nowMs = this.clock.now();
    if (nowMs < this.redisBackAtMs || this.options.redis() === undefined) {
      return this.alone.acquire(key, signal, waitMs, park);
    }
    const pauseUntilMs = this.pauses.untilMs(nowMs);
    const mustHold = pauseUntilMs > 0 || this.held.count(key) > 0;
    if (mustHold && pauseUntilMs - nowMs > waitMs) {
      return rejection("upstream_rate_limited", pauseUntilMs - nowMs);
    }
    if ((this.waitingByKey.get(key) ?? 0) >= this.maxQueue) {
      return rejection("rate_limited", Math.max(pauseUntilMs - nowMs, this.params.intervalMs));
    }
    // Held through the pause from the start: it needs a place among the waiting now.
    if (mustHold && park !== undefined && !park()) {
      return rejection("rate_limited", pauseUntilMs - nowMs);
    }
    const abortSignal = resolveSignal(signal);
    if (abortSignal?.aborted) return Promise.reject(waitError(abortSignal.reason));
    return new Promise<Admission>((resolve, reject) => {
      const waiter: Waiter = {
        key,
        arrivalMs: nowMs,
        deadlineMs: nowMs + waitMs,
        phase: "held",
        settled: false,
        timer: undefined,
        wakeAtMs: 0,
        booked: undefined,
        signal: abortSignal,
        onAbort: undefined,
        park,
        resolve,
        reject,
      };
      if (abortSignal) {
        waiter.onAbort = () => this.giveUp(waiter, waitError(abortSignal.reason));
        abortSignal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      this.waiters.add(waiter);
      this.waitingByKey.set(key, (this.waitingByKey.get(key) ?? 0) + 1);
      if (mustHold) this.held.hold(waiter);
      else this.reserve(waiter);
    });
  }

  pause(untilMs: number, reason: PauseReason): void {
    // The table tells every pacer the pause holds (this one and `alone` included): each re-plans.
    this.pauses.pause(untilMs, reason);
  }

  state(): PacerState {
    const nowMs = this.clock.now();
    let nextWakeMs = Number.POSITIVE_INFINITY;
    for (const waiter of this.waiters) {
      if (waiter.phase === "sleeping" && waiter.wakeAtMs < nextWakeMs) nextWakeMs = waiter.wakeAtMs;
    }
    const aloneState = this.alone.state();
    const pauseUntilMs = this.pauses.untilMs(nowMs);
    return {
      scope: "shared",
      queued: this.waiters.size + aloneState.queued,
      keys: this.waitingByKey.size + aloneState.keys,
      nextTurnInMs: Number.isFinite(nextWakeMs)
        ? Math.max(0, nextWakeMs - nowMs)
        : aloneState.nextTurnInMs,
      pausedForMs: pauseUntilMs > 0 ? pauseUntilMs - nowMs : 0,
      pauseReason: this.pauses.reason(nowMs),
      degraded: nowMs < this.redisBackAtMs,
    };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stopWatching();
    this.held.clear();
    for (const waiter of [...this.waiters]) {
      if (this.detach(waiter)) waiter.reject(new PacerClosedError());
    }
    this.alone.close();
  }

  /** Ends a waiter's part here: no more callbacks, counts down. */
  private detach(waiter: Waiter): boolean {
    if (waiter.settled) return false;
    waiter.settled = true;
    this.waiters.delete(waiter);
    const count = (this.waitingByKey.get(waiter.key) ?? 1) - 1;
    if (count > 0) this.waitingByKey.set(waiter.key, count);
    else this.waitingByKey.delete(waiter.key);
    if (waiter.timer !== undefined) this.clock.clearTimeout(waiter.timer);
    waiter.timer = undefined;
    if (waiter.onAbort) waiter.signal?.removeEventListener("abort", waiter.onAbort);
    return true;
  }

  private settle(waiter: Waiter, admission: Admission): void {
    if (this.detach(waiter)) waiter.resolve(admission);
  }

  /** The request went away (abort, close): give back a booked turn it will not use. */
  private giveUp(waiter: Waiter, err: Error): void {
    const booked = waiter.phase === "sleeping" ? waiter.booked : undefined;
    if (!this.detach(waiter)) return;
    waiter.reject(err);
    if (booked) this.refund(waiter.key, booked);
  }

  private refund(key: string, booked: { tat: string; start: string }): void {
    if (this.closed) return;
    this.scripts.refund(key, booked).catch(() => {
      // The turn stays booked and unused: the upstream sees less, never more.
    });
  }

  private reserve(waiter: Waiter): void {
    waiter.phase = "asking";
    const maxWaitMs = Math.max(0, waiter.deadlineMs - this.clock.now());
    this.scripts.reserve(waiter.key, maxWaitMs).then(
      (reservation) => this.booked(waiter, reservation),
      (err: unknown) => this.redisFailed(waiter, err),
    );
  }

  private booked(waiter: Waiter, reservation: Reservation): void {
    if (waiter.settled) {
      // Gone while Redis answered.
      if (reservation.granted) this.refund(waiter.key, reservation);
      return;
    }
    if (!reservation.granted) {
      this.settle(waiter, rejection("rate_limited", reservation.waitMs));
      return;
    }
    waiter.booked = reservation;
    if (reservation.waitMs <= 0) {
      this.go(waiter);
      return;
    }
    if (waiter.park !== undefined && !waiter.park()) {
      // No place among the waiting: the turn goes back, the request is answered now.
      this.settle(waiter, rejection("rate_limited", reservation.waitMs));
      this.refund(waiter.key, reservation);
      return;
    }
    waiter.phase = "sleeping";
    waiter.wakeAtMs = this.clock.now() + reservation.waitMs;
    waiter.timer = this.clock.setTimeout(() => this.wake(waiter), reservation.waitMs);
  }

  private wake(waiter: Waiter): void {
    waiter.timer = undefined;
    if (waiter.settled) return;
    const nowMs = this.clock.now();
    const pauseUntilMs = this.pauses.untilMs(nowMs);
    if (pauseUntilMs > 0) {
      // The turn fell inside a pause: give it back and book a new one once the pause is over.
      if (waiter.booked) this.refund(waiter.key, waiter.booked);
      waiter.booked = undefined;
      if (pauseUntilMs > waiter.deadlineMs) {
        this.settle(waiter, rejection("upstream_rate_limited", pauseUntilMs - nowMs));
      } else {
        this.held.hold(waiter);
      }
      return;
    }
    this.go(waiter);
  }

  private go(waiter: Waiter): void {
    const booking = waiter.booked!;
    this.settle(waiter, {
      ok: true,
      waitedMs: this.clock.now() - waiter.arrivalMs,
      remaining: booking.remaining,
      resetSeconds: Math.max(0, Math.ceil(booking.fullInMs / 1000)),
    });
  }

  /** Redis failed: pace alone for a while; this waiter continues with the local pacer. */
  private redisFailed(waiter: Waiter, err: unknown): void {
    const nowMs = this.clock.now();
    if (this.redisBackAtMs <= nowMs) {
      this.redisBackAtMs = nowMs + this.retryRedisAfterMs;
      this.options.onRedisError?.(err);
    }
    const { signal, park, resolve, reject } = waiter;
    if (!this.detach(waiter)) return;
    try {
      const remainingMs = Math.max(0, waiter.deadlineMs - nowMs);
      const admission = this.alone.acquire(waiter.key, signal, remainingMs, park);
      Promise.resolve(admission).then(resolve, reject);
    } catch (failure) {
      reject(failure);
    }
  }

  /** A pause began: those who cannot outlast it are told now, not when their turn comes. */
  private replan(): void {
    if (this.closed) return;
    const nowMs = this.clock.now();
    const pauseUntilMs = this.pauses.untilMs(nowMs);
    if (pauseUntilMs === 0) return;
    for (const waiter of [...this.waiters]) {
      if (waiter.deadlineMs >= pauseUntilMs) continue;
      const booking = waiter.phase === "sleeping" ? waiter.booked : undefined;
      this.settle(waiter, rejection("upstream_rate_limited", pauseUntilMs - nowMs));
      if (booking) this.refund(waiter.key, booking);
    }
    this.held.rearm();
  }
}
