/**
 * Secret-free snapshots of a token source for /status, /readyz and metrics: its state in one
 * word, the current token's fingerprint and expiry, and the last fetch and failure.
 */

import type { Clock } from "../base/clock.js";
import type { BearerProxyError } from "../errors.js";
import type { AccessToken, TokenOriginStatus, TokenState, TokenStatus } from "./token-provider.js";

/** What a token source knows about itself at one moment. */
export interface TokenSourceSnapshot {
  closed: boolean;
  /** The usable token, if any. */
  current: AccessToken | undefined;
  inflight: boolean;
  consecutiveFailures: number;
  lastError: BearerProxyError | undefined;
  lastErrorAtWallMs: number | undefined;
  lastFetchAtWallMs: number | undefined;
  lastFetchDurationMs: number | undefined;
  /** Monotonic ms of the next scheduled refresh or retry. */
  nextAttemptAtMs: number | undefined;
  clock: Clock;
  fetchCount: number;
  failureCount: number;
  sharedCacheHits: number;
  /** Where `current` came from; ignored without a current token. */
  origin: TokenOriginStatus | undefined;
}

/** The status of a live source. */
export function describeTokenStatus(s: TokenSourceSnapshot): TokenStatus {
  const { current, lastError } = s;
  return {
    state: stateOf(s),
    fingerprint: current?.fingerprint,
    scope: current?.scope,
    expiresAtWallMs: current?.expiresAtWallMs,
    lifetimeMs: current?.lifetimeMs,
    lastFetchAtWallMs: s.lastFetchAtWallMs,
    lastFetchDurationMs: s.lastFetchDurationMs,
    lastError:
      lastError && s.lastErrorAtWallMs !== undefined
        ? {
            code: lastError.publicCode,
            message: lastError.message,
            atWallMs: s.lastErrorAtWallMs,
            ...excerptOf(lastError),
          }
        : undefined,
    nextRefreshAtWallMs:
      s.nextAttemptAtMs === undefined
        ? undefined
        : s.clock.wallNow() + (s.nextAttemptAtMs - s.clock.now()),
    fetchCount: s.fetchCount,
    failureCount: s.failureCount,
    sharedCacheHits: s.sharedCacheHits,
    origin: current ? s.origin : undefined,
  };
}

function stateOf(s: TokenSourceSnapshot): TokenState {
  if (s.closed) return "closed";
  if (s.current) return s.consecutiveFailures > 0 ? "degraded" : "valid";
  // A first fetch in flight is "fetching"; a retry after failures is still "failed".
  if (s.inflight && s.consecutiveFailures === 0) return "fetching";
  if (s.lastError) return "failed";
  return s.inflight ? "fetching" : "idle";
}

/**
 * The status of a credential with no live source: "idle" (never used, or evicted) or "closed"
 * (the registry shut down). Nothing fetched, nothing failed.
 */
export function emptyTokenStatus(state: "idle" | "closed"): TokenStatus {
  return {
    state,
    fingerprint: undefined,
    scope: undefined,
    expiresAtWallMs: undefined,
    lastFetchAtWallMs: undefined,
    lastFetchDurationMs: undefined,
    lastError: undefined,
    nextRefreshAtWallMs: undefined,
    fetchCount: 0,
    failureCount: 0,
  };
}

/** The scrubbed excerpt of a non-RFC 6749 error body, when the failure has one. */
function excerptOf(error: BearerProxyError): { excerpt?: string } {
  const excerpt = error.details?.bodyExcerpt;
  return typeof excerpt === "string" ? { excerpt } : {};
}
