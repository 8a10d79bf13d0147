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
import { type PaceRate, paceParams } from "./gcra.js";
import {
  type LuaScript,
  parseReservation,
  REFUND,
  RESERVE,
  type Reservation,
  refundArguments,
  reserveArguments,
  scriptKeys,
  scriptRate,
} from "./gcra-script.js";
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
import { type EntryPauses, type PauseReason, privatePauses } from "./pause.js";

/** The two commands the pacer sends; node-redis clients, clusters and sentinels all have them. */
export interface PacingRedis {
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  evalSha?(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
}

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
  const clock = options.clock ?? systemClock;
  const params = paceParams(options.rate);
  const rate = scriptRate(params);
  const pauses = options.pauses ?? privatePauses();
  const maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
  const commandTimeoutMs = options.commandTimeoutMs ?? 500;
  const aloneShare = Math.min(1, Math.max(options.aloneShare ?? 1, 1e-6));
  const retryRedisAfterMs = options.retryRedisAfterMs ?? 1_000;
  // Paces this replica while Redis is away; shares the pauses.
  const alone = createLocalPacer({
    rate: { ...options.rate, perMs: options.rate.perMs / aloneShare },
    waitMs: options.waitMs,
    maxQueue,
    pauses,
    clock,
  });
  const waiters = new Set<Waiter>();
  const waitingByKey = new Map<string, number>();
  /** Requests waiting out a pause, per key, in arrival order. */
  const held = new Map<string, Waiter[]>();
  let pauseTimer: unknown;
  let redisBackAtMs = 0;
  let closed = false;
  const stopWatching = pauses.watch(() => replan());

  function run(scriptToRun: LuaScript, keys: string[], args: string[]): Promise<unknown> {
    const client = options.redis();
    if (client === undefined) return Promise.reject(new Error("no Redis connection"));
    const call = async () => {
      if (client.evalSha) {
        try {
          return await client.evalSha(scriptToRun.sha1, { keys, arguments: args });
        } catch (err) {
          // A Redis that restarted or failed over has forgotten the script: send it whole.
          if (!String((err as Error)?.message).startsWith("NOSCRIPT")) throw err;
        }
      }
      return client.eval(scriptToRun.text, { keys, arguments: args });
    };
    return new Promise((resolve, reject) => {
      const timer = clock.setTimeout(
        () => reject(new Error(`Redis did not answer within ${commandTimeoutMs} ms`)),
        commandTimeoutMs,
      );
      call().then(
        (reply) => {
          clock.clearTimeout(timer);
          resolve(reply);
        },
        (err: unknown) => {
          clock.clearTimeout(timer);
          reject(err);
        },
      );
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
    if (nowMs < redisBackAtMs || options.redis() === undefined) {
      return alone.acquire(key, signal, waitMs, park);
    }
    const pauseUntilMs = pauses.untilMs(nowMs);
    const mustHold = pauseUntilMs > 0 || (held.get(key)?.length ?? 0) > 0;
    if (mustHold && pauseUntilMs - nowMs > waitMs) {
      return rejection("upstream_rate_limited", pauseUntilMs - nowMs);
    }
    if ((waitingByKey.get(key) ?? 0) >= maxQueue) {
      return rejection("rate_limited", Math.max(pauseUntilMs - nowMs, params.intervalMs));
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
        waiter.onAbort = () => giveUp(waiter, waitError(abortSignal.reason));
        abortSignal.addEventListener("abort", waiter.onAbort, { once: true });
      }
      waiters.add(waiter);
      waitingByKey.set(key, (waitingByKey.get(key) ?? 0) + 1);
      if (mustHold) hold(waiter);
      else reserve(waiter);
    });
  }

  /** Ends a waiter's part here: no more callbacks, counts down. */
  function detach(waiter: Waiter): boolean {
    if (waiter.settled) return false;
    waiter.settled = true;
    waiters.delete(waiter);
    const count = (waitingByKey.get(waiter.key) ?? 1) - 1;
    if (count > 0) waitingByKey.set(waiter.key, count);
    else waitingByKey.delete(waiter.key);
    if (waiter.timer !== undefined) clock.clearTimeout(waiter.timer);
    waiter.timer = undefined;
    if (waiter.onAbort) waiter.signal?.removeEventListener("abort", waiter.onAbort);
    return true;
  }

  function settle(waiter: Waiter, admission: Admission): void {
    if (detach(waiter)) waiter.resolve(admission);
  }

  /** The request went away (abort, close): give back a booked turn it will not use. */
  function giveUp(waiter: Waiter, err: Error): void {
    const booked = waiter.phase === "sleeping" ? waiter.booked : undefined;
    if (!detach(waiter)) return;
    waiter.reject(err);
    if (booked) refund(waiter.key, booked);
  }

  function refund(key: string, booked: { tat: string; start: string }): void {
    if (closed) return;
    run(REFUND, scriptKeys(options.keyPrefix, key, rate), refundArguments(rate, booked)).catch(
      () => {
        // The turn stays booked and unused: the upstream sees less, never more.
      },
    );
  }

  function reserve(waiter: Waiter): void {
    waiter.phase = "asking";
    const maxWaitMs = Math.max(0, waiter.deadlineMs - clock.now());
    run(RESERVE, scriptKeys(options.keyPrefix, waiter.key, rate), reserveArguments(rate, maxWaitMs))
      .then(parseReservation)
      .then(
        (reservation) => booked(waiter, reservation),
        (err: unknown) => redisFailed(waiter, err),
      );
  }

  function booked(waiter: Waiter, reservation: Reservation): void {
    if (waiter.settled) {
      // Gone while Redis answered.
      if (reservation.granted) refund(waiter.key, reservation);
      return;
    }
    if (!reservation.granted) {
      settle(waiter, rejection("rate_limited", reservation.waitMs));
      return;
    }
    waiter.booked = reservation;
    if (reservation.waitMs <= 0) {
      go(waiter);
      return;
    }
    if (waiter.park !== undefined && !waiter.park()) {
      // No place among the waiting: the turn goes back, the request is answered now.
      settle(waiter, rejection("rate_limited", reservation.waitMs));
      refund(waiter.key, reservation);
      return;
    }
    waiter.phase = "sleeping";
    waiter.wakeAtMs = clock.now() + reservation.waitMs;
    waiter.timer = clock.setTimeout(() => wake(waiter), reservation.waitMs);
  }

  function wake(waiter: Waiter): void {
    waiter.timer = undefined;
    if (waiter.settled) return;
    const nowMs = clock.now();
    const pauseUntilMs = pauses.untilMs(nowMs);
    if (pauseUntilMs > 0) {
      // The turn fell inside a pause: give it back and book a new one once the pause is over.
      if (waiter.booked) refund(waiter.key, waiter.booked);
      waiter.booked = undefined;
      if (pauseUntilMs > waiter.deadlineMs) {
        settle(waiter, rejection("upstream_rate_limited", pauseUntilMs - nowMs));
      } else {
        hold(waiter);
      }
      return;
    }
    go(waiter);
  }

  function go(waiter: Waiter): void {
    const booking = waiter.booked!;
    settle(waiter, {
      ok: true,
      waitedMs: clock.now() - waiter.arrivalMs,
      remaining: booking.remaining,
      resetSeconds: Math.max(0, Math.ceil(booking.fullInMs / 1000)),
    });
  }

  /** Redis failed: pace alone for a while; this waiter continues with the local pacer. */
  function redisFailed(waiter: Waiter, err: unknown): void {
    const nowMs = clock.now();
    if (redisBackAtMs <= nowMs) {
      redisBackAtMs = nowMs + retryRedisAfterMs;
      options.onRedisError?.(err);
    }
    const { signal, park, resolve, reject } = waiter;
    if (!detach(waiter)) return;
    try {
      const remainingMs = Math.max(0, waiter.deadlineMs - nowMs);
      const admission = alone.acquire(waiter.key, signal, remainingMs, park);
      Promise.resolve(admission).then(resolve, reject);
    } catch (failure) {
      reject(failure);
    }
  }

  /** Keeps a waiter here until the pause ends, in arrival order. */
  function hold(waiter: Waiter): void {
    waiter.phase = "held";
    let queue = held.get(waiter.key);
    if (queue === undefined) {
      queue = [];
      held.set(waiter.key, queue);
    }
    // A waiter back from a turn that fell in the pause arrived before later ones: keep the order.
    let index = queue.length;
    while (index > 0 && queue[index - 1]!.arrivalMs > waiter.arrivalMs) index--;
    queue.splice(index, 0, waiter);
    armPauseTimer();
  }

  function armPauseTimer(): void {
    if (pauseTimer !== undefined) clock.clearTimeout(pauseTimer);
    const nowMs = clock.now();
    const untilMs = pauses.untilMs(nowMs);
    pauseTimer = clock.setTimeout(releaseHeld, Math.max(0, untilMs - nowMs));
  }

  /** The pause is over: every held waiter books its turn, in arrival order. */
  function releaseHeld(): void {
    pauseTimer = undefined;
    if (pauses.untilMs(clock.now()) > 0) {
      armPauseTimer();
      return;
    }
    const queues = [...held.values()];
    held.clear();
    for (const queue of queues) {
      for (const waiter of queue) if (!waiter.settled) reserve(waiter);
    }
  }

  function pause(untilMs: number, reason: PauseReason): void {
    // The table tells every pacer the pause holds (this one and `alone` included): each re-plans.
    pauses.pause(untilMs, reason);
  }

  /** A pause began: those who cannot outlast it are told now, not when their turn comes. */
  function replan(): void {
    if (closed) return;
    const nowMs = clock.now();
    const pauseUntilMs = pauses.untilMs(nowMs);
    if (pauseUntilMs === 0) return;
    for (const waiter of [...waiters]) {
      if (waiter.deadlineMs >= pauseUntilMs) continue;
      const booking = waiter.phase === "sleeping" ? waiter.booked : undefined;
      settle(waiter, rejection("upstream_rate_limited", pauseUntilMs - nowMs));
      if (booking) refund(waiter.key, booking);
    }
    if (held.size > 0) armPauseTimer();
  }

  function state(): PacerState {
    const nowMs = clock.now();
    let nextWakeMs = Number.POSITIVE_INFINITY;
    for (const waiter of waiters) {
      if (waiter.phase === "sleeping" && waiter.wakeAtMs < nextWakeMs) nextWakeMs = waiter.wakeAtMs;
    }
    const aloneState = alone.state();
    const pauseUntilMs = pauses.untilMs(nowMs);
    return {
      scope: "shared",
      queued: waiters.size + aloneState.queued,
      keys: waitingByKey.size + aloneState.keys,
      nextTurnInMs: Number.isFinite(nextWakeMs)
        ? Math.max(0, nextWakeMs - nowMs)
        : aloneState.nextTurnInMs,
      pausedForMs: pauseUntilMs > 0 ? pauseUntilMs - nowMs : 0,
      pauseReason: pauses.reason(nowMs),
      degraded: nowMs < redisBackAtMs,
    };
  }

  function close(): void {
    if (closed) return;
    closed = true;
    stopWatching();
    if (pauseTimer !== undefined) clock.clearTimeout(pauseTimer);
    held.clear();
    for (const waiter of [...waiters]) {
      if (detach(waiter)) waiter.reject(new PacerClosedError());
    }
    alone.close();
  }

  return { acquire, pause, state, close };
}
