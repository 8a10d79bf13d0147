/**
 * When the exchange may send a request again (`upstreams[].retry`, issue 26): only a request a
 * second copy can't harm, only before any byte of the answer reached the client, after a
 * full-jitter backoff, and only while the retry budget lasts — retries must never turn an
 * upstream's bad minute into a storm.
 *
 * The backoff is the house's own full-jitter function (base/backoff.ts): cockatiel 3's
 * generators draw from Math.random with no way to inject it, and its policies wrap a promise
 * call, where our exchange is a callback handler that retries from inside undici's onError.
 */
import type { IncomingHttpHeaders } from "node:http";
import { computeBackoffMs } from "../base/backoff.js";
import { isFieldName } from "../net/raw-headers.js";

/** What went wrong with an attempt: no connection, a reset before the answer, or a status. */
export type RetryReason = "connect" | "reset" | "502" | "503" | "504";

/** The reasons retried when `retry.on` is not given. */
export const DEFAULT_RETRY_ON: readonly RetryReason[] = ["connect", "reset"];

/** `upstreams[].retry` as normalised (config/proxy-config.ts `RetryConfig` fits as it is). */
export interface RetryPolicy {
  /** Extra attempts after the first; 0 disables retries. Default 1. */
  attempts: number;
  /** Failures that are retried; default connect and reset. */
  on: readonly RetryReason[];
  /**
   * First backoff cap in ms (default 50); attempt n waits uniformly in
   * [0, min(max, base·2^(n-1))).
   */
  backoffBaseMs?: number | undefined;
  /** Largest backoff in ms (default 1000). */
  backoffMaxMs?: number | undefined;
}

const DEFAULT_BACKOFF_BASE_MS = 50;
const DEFAULT_BACKOFF_MAX_MS = 1_000;

/** RFC 9110 §9.2.2: methods whose repetition has the same effect as one request. */
const IDEMPOTENT_METHODS = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]);

/**
 * True when sending the request twice can't do harm: an idempotent method, or any method with
 * an `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header: the server deduplicates).
 * `headers` is Node's header object or a flat name/value list as forwarded.
 */
export function isRetrySafe(
  method: string,
  headers: IncomingHttpHeaders | readonly string[],
): boolean {
  if (IDEMPOTENT_METHODS.has(method)) return true;
  if (Array.isArray(headers)) {
    for (let i = 0; i + 1 < headers.length; i += 2) {
      if (isFieldName(headers[i]!, "idempotency-key") && headers[i + 1]!.trim() !== "") {
        return true;
      }
    }
    return false;
  }
  const key = (headers as IncomingHttpHeaders)["idempotency-key"];
  return typeof key === "string" ? key.trim() !== "" : Array.isArray(key) && key.length > 0;
}

export interface RetryInput {
  /** The retry being considered: 1 for the first. */
  attempt: number;
  reason: RetryReason;
  /** Response bytes (head or body) already relayed to the client; any means no retry. */
  bytesRelayed: number;
}

/**
 * The policy's part of the decision. The caller checks the rest: {@link isRetrySafe}, a
 * replayable (buffered) body, and the budget's `tryAcquireRetry()` last, so a retry that
 * will not happen takes nothing from the budget.
 */
export function shouldRetry(policy: RetryPolicy, input: RetryInput): boolean {
  return (
    input.bytesRelayed === 0 && input.attempt <= policy.attempts && policy.on.includes(input.reason)
  );
}

/** Milliseconds before retry `attempt` (1 for the first): full jitter. */
export function retryDelayMs(
  policy: RetryPolicy,
  attempt: number,
  random: () => number = Math.random,
): number {
  return computeBackoffMs(
    {
      initialBackoffMs: policy.backoffBaseMs ?? DEFAULT_BACKOFF_BASE_MS,
      maxBackoffMs: policy.backoffMaxMs ?? DEFAULT_BACKOFF_MAX_MS,
    },
    { attempt, random },
  );
}

/** Caps retries to a share of recent requests (Finagle's RetryBudget, Envoy's retry_budget). */
export interface RetryBudget {
  /** Count one original request (not a retry). */
  recordRequest(): void;
  /** Takes one retry from the budget; false when the budget is spent (don't retry). */
  tryAcquireRetry(): boolean;
  /** For /status: counts over the window and the retries it allows. */
  state(): { requests: number; retries: number; allowedRetries: number };
}

export interface RetryBudgetOptions {
  /** Retries may be this percent of requests over the window (`retry.budget`, default 20). */
  percent: number;
  /** The sliding window, default 10 s. */
  windowMs?: number;
  /**
   * Retries allowed per second of window whatever the traffic (default 3), so a quiet upstream
   * can still have its few failures retried — Envoy's min_retry_concurrency, Finagle's
   * minRetriesPerSec.
   */
  minPerSecond?: number;
  /** Monotonic ms. */
  now?: () => number;
}

/** Buckets per window: the window slides in steps of a tenth. */
const BUCKETS = 10;

export function createRetryBudget(options: RetryBudgetOptions): RetryBudget {
  const windowMs = options.windowMs ?? 10_000;
  const minRetries = (options.minPerSecond ?? 3) * (windowMs / 1000);
  const share = options.percent / 100;
  const now = options.now ?? (() => performance.now());
  const bucketMs = windowMs / BUCKETS;
  const requests = new Float64Array(BUCKETS);
  const retries = new Float64Array(BUCKETS);
  let requestTotal = 0;
  let retryTotal = 0;
  let current = Math.floor(now() / bucketMs);

  /** Moves the window to now, emptying the buckets that slid out. */
  function slide(): number {
    const bucket = Math.floor(now() / bucketMs);
    const steps = Math.min(bucket - current, BUCKETS);
    for (let i = 1; i <= steps; i++) {
      const index = (current + i) % BUCKETS;
      requestTotal -= requests[index]!;
      retryTotal -= retries[index]!;
      requests[index] = 0;
      retries[index] = 0;
    }
    if (bucket > current) current = bucket;
    return current % BUCKETS;
  }

  const allowed = () => Math.max(minRetries, Math.floor(requestTotal * share));

  return {
    recordRequest() {
      requests[slide()]!++;
      requestTotal++;
    },
    tryAcquireRetry() {
      const index = slide();
      if (retryTotal >= allowed()) return false;
      retries[index]!++;
      retryTotal++;
      return true;
    },
    state() {
      slide();
      return { requests: requestTotal, retries: retryTotal, allowedRetries: allowed() };
    },
  };
}
