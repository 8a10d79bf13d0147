import type { TokenSpan } from "../observability/tracing.js";

/**
 * The token engine's contract with the rest of bearer-proxy. The proxy asks a `TokenProvider`
 * for a token before forwarding and tells it when the upstream rejected one; admin routes read
 * `TokenStatus`. Nothing here ever exposes a secret; token values leave only through `value`.
 */
import type { Dpop } from "./dpop/index.js";

// Types only: a sidecar without `upstreams[].dpop` loads nothing of src/token/dpop/.
export type { Dpop };

/** A bearer token as cached. Times are on the injected monotonic clock unless named `Wall`. */
export interface AccessToken {
  /** The raw token. Only ever written into an Authorization header. */
  readonly value: string;
  /** First 8 hex chars of sha256(value): the only form of a token that may be logged or shown. */
  readonly fingerprint: string;
  readonly scope: string | undefined;
  /** Monotonic ms when the token response arrived. */
  readonly obtainedAtMs: number;
  /** Monotonic ms after which the token must not be used (server's expiry). */
  readonly expiresAtMs: number;
  /** Wall-clock ms of expiry, for metrics and status. */
  readonly expiresAtWallMs: number;
  /** Lifetime the token endpoint granted, in ms. */
  readonly lifetimeMs: number;
  /**
   * The scheme the token goes with: "DPoP" for a DPoP-bound token (RFC 9449 §5), else "Bearer"
   * (whatever spelling the token endpoint used). Undefined counts as "Bearer".
   */
  readonly tokenType?: string;
  /**
   * The key a DPoP-bound token is bound to (its `cnf.jkt` is `dpop.jkt`), set exactly when
   * `tokenType` is "DPoP": every request then carries `Authorization: DPoP <value>`
   * (`dpop.authorization(value)`) and a fresh proof (`dpop.proofFor(method, url, value)`),
   * and its responses go to `dpop.noteResponse`. Undefined: a bearer token.
   */
  readonly dpop?: Dpop | undefined;
}

export type TokenState =
  /** No token yet and none being fetched (lazy source before first use). */
  | "idle"
  /** First fetch in flight. */
  | "fetching"
  /** A token is usable. */
  | "valid"
  /** A token is usable but refreshing it failed; retrying with backoff. */
  | "degraded"
  /** No usable token: the last fetch failed and any old token has expired. */
  | "failed"
  | "closed";

/**
 * Where a token came from: a request this source made to the token endpoint, or the shared
 * Redis cache (`tokenCache.redis`), where another replica — or this one before a restart — had
 * stored what the token endpoint issued to it. Logged as `source`, shown on /status.
 */
export type TokenOrigin = "token-endpoint" | "shared-cache";

/** Where the current token came from and when (wall-clock ms). */
export interface TokenOriginStatus {
  source: TokenOrigin;
  /** When this replica got the token: the token endpoint's answer, or the read from Redis. */
  receivedAtWallMs: number;
  /** When the token endpoint issued it (for a shared token, to the replica that asked). */
  issuedAtWallMs: number;
}

/** Secret-free snapshot for /status, /readyz and metrics. */
export interface TokenStatus {
  state: TokenState;
  /** Fingerprint of the current token, if any. */
  fingerprint: string | undefined;
  scope: string | undefined;
  expiresAtWallMs: number | undefined;
  /** Lifetime of the current token, counted from its request (expiry minus this: its start). */
  lifetimeMs?: number | undefined;
  lastFetchAtWallMs: number | undefined;
  lastFetchDurationMs: number | undefined;
  /** Last failure: public code plus the IdP's `error`/`error_description` when it sent them. */
  lastError:
    | {
        code: string;
        message: string;
        atWallMs: number;
        /** Scrubbed start of a non-RFC 6749 error body (no credentials, no token-like strings). */
        excerpt?: string;
      }
    | undefined;
  /** Wall-clock ms of the next scheduled refresh or retry. */
  nextRefreshAtWallMs: number | undefined;
  /**
   * Token endpoint requests this source made (failed ones included; tokens taken from the
   * shared cache are not requests: `sharedCacheHits`).
   */
  fetchCount: number;
  failureCount: number;
  /** Tokens taken from the shared Redis cache instead of asking the token endpoint. */
  sharedCacheHits?: number | undefined;
  /** Where the current token came from and when; absent without a current token. */
  origin?: TokenOriginStatus | undefined;
  /**
   * The DPoP key's public facts (`upstreams[].dpop`) once the first fetch loaded it: RFC 7638
   * thumbprint and signing algorithm, never the key or a proof.
   */
  dpop?: { jkt: string; algorithm: string } | undefined;
}

export interface TokenProvider {
  /**
   * A usable token: the cached one, or waits (bounded by the policy's waitTimeoutMs) for the
   * in-flight fetch. Rejects with a BearerProxyError (token_unavailable / token_rejected).
   */
  getToken(signal?: AbortSignal, waiter?: TokenSpan): Promise<AccessToken>;
  /** The cached token if usable right now, without waiting. The hot path tries this first. */
  peekToken(): AccessToken | undefined;
  /**
   * The upstream answered 401 to `token`: drop it if it is still the cached one and older than
   * minAgeBeforeInvalidateMs. Returns true if it was dropped; a fetch then follows as soon as
   * a pending backoff and minRefreshIntervalMs allow. `waiter`: the request's token wait, which
   * the fetch this starts joins (its trace), as in getToken.
   */
  invalidate(token: AccessToken, waiter?: TokenSpan): boolean;
  /** Start the first fetch now (prefetch) if none has happened. */
  start(): void;
  status(): TokenStatus;
  /** Stop timers and watchers; later getToken calls reject. */
  close(): void;
}
