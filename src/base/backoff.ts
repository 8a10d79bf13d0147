/**
 * Retry delays: exponential with full jitter (AWS architecture blog, "Exponential Backoff And
 * Jitter"), never shorter than the server's Retry-After, and slow for configuration faults so a
 * wrong secret does not hammer the IdP. The token source retries failed token requests with it,
 * the exchange's retry policy (pacing/retry-policy.ts) failed upstream attempts.
 */

export interface BackoffPolicy {
  initialBackoffMs: number;
  maxBackoffMs: number;
}

export interface BackoffInput {
  /** Consecutive failures so far, 1 for the first. */
  attempt: number;
  /** Seconds the server asked us to wait (Retry-After), if any. */
  retryAfterSeconds?: number | undefined;
  /** The token endpoint refused our credentials: retrying soon cannot help. */
  configFault?: boolean;
  /** Uniform in [0, 1); injectable for tests. */
  random?: () => number;
}

/**
 * Delay in ms before the next attempt. Full jitter: uniform in [0, min(max, initial·2^(n-1))).
 * Config faults wait between max and 1.1·max. Retry-After is a lower bound.
 */
export function computeBackoffMs(policy: BackoffPolicy, input: BackoffInput): number {
  const random = input.random ?? Math.random;
  let delayMs: number;
  if (input.configFault) {
    delayMs = policy.maxBackoffMs * (1 + 0.1 * random());
  } else {
    const exponent = Math.min(Math.max(input.attempt, 1) - 1, 30);
    const capMs = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * 2 ** exponent);
    delayMs = random() * capMs;
  }
  const retryAfterMs = (input.retryAfterSeconds ?? 0) * 1000;
  return Math.round(Math.max(delayMs, retryAfterMs));
}
