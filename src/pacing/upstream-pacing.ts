/**
 * One upstream's pacing as the request walk sees it (issue 26): its pacer (the gate before
 * dispatch), its retry policy and budget (used inside the exchange), the `RateLimit-Policy` it
 * advertises, and the metrics both feed. The pacers build one per upstream (pacers.ts) and
 * keeps it across reloads while the upstream's settings stay the same.
 *
 * The hot path stays cheap: an admission at once touches no metric (prom-client hashes its
 * labels on every update); the wait histogram sees only requests that had to wait, refusals and
 * retries are counted as they happen, and the queue depth is read from the pacers at scrape.
 */
import type { RateLimitConfig, RetryConfig } from "../config/proxy-config.js";
import type { Metrics } from "../observability/metrics.js";
import type { Admission, Pacer } from "./limiter.js";
import type { PauseReason } from "./pause.js";
import { rateLimitPolicyValue } from "./ratelimit-headers.js";
import {
  createRetryBudget,
  type RetryBudget,
  type RetryPolicy,
  type RetryReason,
} from "./retry-policy.js";

/** `bearer_proxy_rate_limited_total{reason}`. */
export type RateLimitedReason =
  /** Refused by our own limit (`rate_limited`): the wait would outlast `wait`, or the queue is full. */
  | "limit"
  /** Refused while the upstream's pause runs (`upstream_rate_limited`). */
  | "paused"
  /** Refused (`rate_limited`) because `limits.maxWaiting` requests wait already. */
  | "max_waiting"
  /** Refused (`rate_limited`) because `limits.maxWaitingPerCaller` of its caller's wait already. */
  | "max_waiting_per_caller"
  /** The upstream answered 429 / 503 with a Retry-After: the pause starts (the answer is relayed). */
  | "upstream_429"
  | "upstream_503";

/** Why the gate answered 429: the pacer's code, or the waiting room's bound. */
export type GateRefusalReason =
  | "rate_limited"
  | "upstream_rate_limited"
  | "max_waiting"
  | "max_waiting_per_caller";

export interface UpstreamPacing {
  readonly upstream: string;
  readonly pacer: Pacer;
  /** One budget per caller (`rateLimit.by: caller`) instead of one for the upstream. */
  readonly byCaller: boolean;
  readonly rateLimit: RateLimitConfig | undefined;
  readonly retry: RetryPolicy;
  readonly budget: RetryBudget;
  /** False when `retry.attempts` is 0: nothing is counted for the budget. */
  readonly retries: boolean;
  /** The `RateLimit-Policy` value; undefined without a `rateLimit` (nothing to advertise). */
  readonly policy: string | undefined;
  /** Longest pause one Retry-After imposes (`rateLimit.maxPause`; 0: none). */
  readonly maxPauseMs: number;
  /** The gate let a request through (a first attempt; retries are not counted here). */
  admitted(admission: Extract<Admission, { ok: true }>): void;
  /** The gate answered 429: past the limit or the pause, or no place among the waiting. */
  refused(reason: GateRefusalReason): void;
  /**
   * The upstream said slow down (a 429 or 503 with Retry-After): no request goes for `ms`
   * (already cut to `maxPauseMs`), here or, with `pauseScope: credential`, on the entries
   * sharing the credential.
   */
  slowDown(ms: number, status: 429 | 503): void;
  /** The exchange sends the request again. */
  retried(reason: RetryReason): void;
}

export interface UpstreamPacingOptions {
  upstream: string;
  pacer: Pacer;
  rateLimit: RateLimitConfig | undefined;
  /** `rateLimit.maxPause` in ms. */
  maxPauseMs: number;
  retry: RetryConfig;
  metrics: Metrics;
  /** The pacer's monotonic clock (default performance.now). */
  now?: () => number;
}

export function createUpstreamPacing(options: UpstreamPacingOptions): UpstreamPacing {
  const { upstream, pacer, rateLimit, metrics } = options;
  const now = options.now ?? (() => performance.now());
  const budget = createRetryBudget({ percent: options.retry.budgetPercent });
  const retries = options.retry.attempts > 0;
  // Children bound once: the label hashing happens here, not per event.
  const waited = metrics.rateLimitWaitSeconds.labels({ upstream });
  const refusedFor: Record<GateRefusalReason, { inc(): void }> = {
    rate_limited: metrics.rateLimitedTotal.labels({ upstream, reason: "limit" }),
    upstream_rate_limited: metrics.rateLimitedTotal.labels({ upstream, reason: "paused" }),
    max_waiting: metrics.rateLimitedTotal.labels({ upstream, reason: "max_waiting" }),
    max_waiting_per_caller: metrics.rateLimitedTotal.labels({
      upstream,
      reason: "max_waiting_per_caller",
    }),
  };
  return {
    upstream,
    pacer,
    byCaller: rateLimit?.by === "caller",
    rateLimit,
    retry: { attempts: options.retry.attempts, on: options.retry.on },
    budget,
    retries,
    policy: rateLimit ? rateLimitPolicyValue(rateLimit.requests, rateLimit.perMs) : undefined,
    maxPauseMs: options.maxPauseMs,
    admitted(admission) {
      if (retries) budget.recordRequest();
      if (admission.waitedMs > 0) waited.observe(admission.waitedMs / 1000);
    },
    refused(reason) {
      refusedFor[reason].inc();
    },
    slowDown(ms, status) {
      const reason: PauseReason = status === 429 ? "429" : "503";
      const pauseMs = Math.min(ms, options.maxPauseMs);
      if (pauseMs > 0) pacer.pause(now() + pauseMs, reason);
      metrics.rateLimitedTotal.inc({ upstream, reason: `upstream_${reason}` });
    },
    retried(reason) {
      metrics.retriesTotal.inc({ upstream, reason });
    },
  };
}
