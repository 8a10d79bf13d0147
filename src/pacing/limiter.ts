/**
 * The pacing gate (issue 26): one pacer per upstream, consulted once in the request walk before
 * dispatch, like the queue timeout. A request over the limit waits for its turn in arrival order,
 * up to `rateLimit.wait`, then goes; past that it is answered 429 `rate_limited`. While the
 * upstream has asked us to slow down (pause.ts) requests wait within the same bound or are
 * answered 429 `upstream_rate_limited`.
 *
 * Two implementations behind one interface: local-pacer.ts (per replica) and shared-pacer.ts
 * (all replicas, through the shared cache's Redis). Keys are budgets: the upstream's name for
 * `by: upstream`, the caller's identity for `by: caller`.
 */
import type { PauseReason } from "./pause.js";

/** The pacer's answer for one request. */
export type Admission =
  | {
      ok: true;
      /** How long the request waited for its turn (0 on the fast path). */
      waitedMs: number;
      /** Requests that could go at once right after this one (RateLimit `r`). */
      remaining: number;
      /** Seconds until the whole allowance is back if nobody else goes (RateLimit `t`). */
      resetSeconds: number;
    }
  | {
      ok: false;
      /** 429 `rate_limited`: our own limit; 429 `upstream_rate_limited`: the upstream's pause. */
      code: "rate_limited" | "upstream_rate_limited";
      /** Whole seconds (≥ 1) until a retry can expect a turn: the Retry-After value. */
      retryAfterSeconds: number;
    };

/** The signal that ends a wait, or a function making it, called only if the request must wait. */
export type WaitSignal = AbortSignal | (() => AbortSignal | undefined);

/**
 * Asked when the pacer is about to hold a request past now (a later turn, or a pause): true
 * gives it a place among the waiting (`limits.maxWaiting`, `maxWaitingPerCaller`), false refuses
 * it at once with 429 `rate_limited`. A pacer may ask again for a request it holds already
 * (held through a pause, then asleep towards its turn): the answer is then true.
 */
export type ParkRequest = () => boolean;

export interface Pacer {
  /**
   * Asks for a turn for one request on budget `key`. Returns the admission synchronously when
   * it is decided at once (a free slot, or no wait allowed), else a promise that settles when
   * the turn comes or the wait is over. The promise rejects with the signal's reason when the
   * signal aborts, and with {@link PacerClosedError} when the pacer closes.
   * `waitMs` overrides the configured wait (e.g. 0 for a retry that must not queue). `park`,
   * when given, is asked before the request is held past now.
   */
  acquire(
    key: string,
    signal?: WaitSignal,
    waitMs?: number,
    park?: ParkRequest,
  ): Admission | Promise<Admission>;
  /**
   * The admission when a turn is free right now (nobody waiting on `key`, no pause, a free
   * slot), else undefined — decided without waiting, parking or refusing (`acquire` decides
   * those). Optional: a pacer that can't tell at once (the shared one) has none.
   */
  admitNow?(key: string): Admission | undefined;
  /**
   * The upstream said slow down (a 429/503 Retry-After): no request of this pacer (and, with
   * `pauseScope: credential`, of the pacers sharing its credential) goes before `untilMs` (the
   * pacer's monotonic clock, e.g. `clock.now() + pauseFromRetryAfter(...)`).
   */
  pause(untilMs: number, reason: PauseReason): void;
  /** For /status and metrics. */
  state(): PacerState;
  /** Stops timers and rejects every waiting request with PacerClosedError. */
  close(): void;
}

export interface PacerState {
  scope: "local" | "shared";
  /** Requests waiting for their turn, all keys (`bearer_proxy_rate_limit_queue_depth`). */
  queued: number;
  /** Keys with pacing state (one for `by: upstream`, callers seen lately for `by: caller`). */
  keys: number;
  /** ms until the next waiting request's turn (0 when none waits). */
  nextTurnInMs: number;
  /** ms left of the upstream's pause (0: none) and why. */
  pausedForMs: number;
  pauseReason: PauseReason | undefined;
  /** Shared scope only: Redis failed lately and this replica paces alone. */
  degraded: boolean;
}

/** A waiting request was cut short because its pacer closed (reload, shutdown). */
export class PacerClosedError extends Error {
  constructor() {
    super("the pacer was closed while the request waited");
    this.name = "PacerClosedError";
  }
}

/** Retry-After in whole seconds for a wait of `ms`: never 0, which invites an instant retry. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

export function rejection(
  code: "rate_limited" | "upstream_rate_limited",
  waitMs: number,
): Admission {
  return { ok: false, code, retryAfterSeconds: retryAfterSeconds(waitMs) };
}

/** Reads a {@link WaitSignal} once a request has to wait. */
export function resolveSignal(signal: WaitSignal | undefined): AbortSignal | undefined {
  return typeof signal === "function" ? signal() : signal;
}

/** What a wait rejects with when its signal aborts: the signal's reason, as an Error. */
export function waitError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason ?? "the wait was aborted"));
}

/** Requests waiting per key when the configuration names no cap. */
export const DEFAULT_MAX_QUEUE = 1_000;
