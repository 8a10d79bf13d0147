/**
 * An upstream's pacing on /status (issue 26): its limit as configured, the limiter's state
 * (waiting requests, budgets, next turn), any pause the upstream imposed with its end time, and
 * the retry budget's window. Built from the pacer's own state, never from request data.
 */

import type { WaitingLimits, WaitingState } from "../base/waiting-room.js";
import type { RateLimitConfig, RetryConfig } from "../config/proxy-config.js";
import type { PacerState } from "./limiter.js";

/**
 * Requests waiting for a pacing turn or an upstream's pause, over every upstream (issue 30
 * item 3): out of `limits.maxInFlight`, bounded by `maxWaiting` and `maxWaitingPerCaller`.
 */
export interface WaitingStatus {
  /** Waiting now. */
  requests: number;
  maxWaiting: number;
  /** Callers (an `allow` identity, else a peer address) with a request waiting. */
  callers: number;
  /** The most requests one caller has waiting. */
  mostByOneCaller: number;
  maxWaitingPerCaller: number;
  /** Requests answered 429 `rate_limited` for want of a place, since start, by the bound. */
  refused: { maxWaiting: number; maxWaitingPerCaller: number };
}

export function waitingStatus(state: WaitingState, limits: WaitingLimits): WaitingStatus {
  return {
    requests: state.waiting,
    maxWaiting: limits.maxWaiting,
    callers: state.callers,
    mostByOneCaller: state.mostByOneCaller,
    maxWaitingPerCaller: limits.maxWaitingPerCaller,
    refused: {
      maxWaiting: state.refused.max_waiting,
      maxWaitingPerCaller: state.refused.max_waiting_per_caller,
    },
  };
}

export interface RateLimitStatus {
  /** `upstreams[].rateLimit` as configured; null without one (only the upstream's pauses hold). */
  limit: {
    requests: number;
    perSeconds: number;
    burst: number;
    by: "upstream" | "caller";
    scope: "local" | "shared";
    waitSeconds: number;
  } | null;
  /** Requests waiting for their turn now, over every budget. */
  queued: number;
  /** Budgets with state (one for `by: upstream`, the callers seen lately for `by: caller`). */
  budgets: number;
  /** Seconds until the next waiting request goes (0 when none waits). */
  nextTurnInSeconds: number;
  /** Shared scope: Redis failed lately and this replica paces alone. */
  degraded?: boolean;
  /** The upstream's "slow down" (a 429 or 503 with Retry-After) while it lasts; else null. */
  pause: { until: string; reason: "429" | "503"; remainingSeconds: number } | null;
  /** `upstreams[].retry` and its budget over the last 10 s. */
  retry: {
    attempts: number;
    on: readonly string[];
    budgetPercent: number;
    requests: number;
    retries: number;
    allowedRetries: number;
  };
}

export interface PacingSnapshot {
  rateLimit: RateLimitConfig | undefined;
  retry: RetryConfig;
  state: PacerState;
  budget: { requests: number; retries: number; allowedRetries: number };
}

/** Seconds with two decimals: enough for an operator reading a wait or a pause. */
const seconds = (ms: number) => Math.round(ms / 10) / 100;

export function rateLimitStatus(snapshot: PacingSnapshot, nowWallMs: number): RateLimitStatus {
  const { rateLimit, retry, state, budget } = snapshot;
  return {
    limit: rateLimit
      ? {
          requests: rateLimit.requests,
          perSeconds: seconds(rateLimit.perMs),
          burst: rateLimit.burst,
          by: rateLimit.by,
          scope: rateLimit.scope,
          waitSeconds: seconds(rateLimit.waitMs),
        }
      : null,
    queued: state.queued,
    budgets: state.keys,
    nextTurnInSeconds: seconds(state.nextTurnInMs),
    ...(state.scope === "shared" ? { degraded: state.degraded } : {}),
    pause:
      state.pausedForMs > 0 && state.pauseReason !== undefined
        ? {
            until: new Date(nowWallMs + state.pausedForMs).toISOString(),
            reason: state.pauseReason,
            remainingSeconds: seconds(state.pausedForMs),
          }
        : null,
    retry: {
      attempts: retry.attempts,
      on: retry.on,
      budgetPercent: retry.budgetPercent,
      ...budget,
    },
  };
}

/**
 * Worth a line on /status: a limit is configured, a pause runs, someone waits, or retries
 * happened lately. An upstream with none of these shows nothing (10,000 quiet rows stay small).
 */
export function isWorthShowing(status: RateLimitStatus): boolean {
  return (
    status.limit !== null || status.pause !== null || status.queued > 0 || status.retry.retries > 0
  );
}
