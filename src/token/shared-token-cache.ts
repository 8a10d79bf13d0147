/**
 * The contract of the token cache shared across replicas through Redis (issue 6). The token
 * engine plugs `getOrFetch` in where it would call the token endpoint; everything else about
 * Redis (locking, encryption, outages) stays behind this interface.
 */
import type { RedisState } from "../base/redis-connection.js";

/** A token as stored in Redis. Wall-clock times, because replicas share no monotonic clock. */
export interface SharedToken {
  accessToken: string;
  tokenType: string;
  scope: string | undefined;
  /** Wall-clock ms when the token endpoint answered. */
  obtainedAtWallMs: number;
  /** Wall-clock ms after which the token must not be used. */
  expiresAtWallMs: number;
}

export interface GetOrFetchArgs {
  /**
   * Stable, secret-free identifier of the credential (e.g. sha256 of token URL, client id,
   * scope, version and params). Used in Redis keys and as HKDF salt and GCM associated data.
   */
  credentialKey: string;
  /** The client secret: derives the encryption key. Never sent to Redis in any form. */
  secret: string;
  /** A stored token is fresh until obtained + refreshFraction × lifetime (e.g. 0.75). */
  refreshFraction: number;
  /** Fingerprint of a token the upstream rejected (401): a stored token with it is stale. */
  rejectFingerprint?: string | undefined;
  /**
   * Asks the token endpoint; called at most once per getOrFetch, and only by the call that asks
   * (a call joining one in flight in this replica never calls its own): whether it was called
   * tells a token this call fetched from one read from Redis. Its errors propagate.
   */
  fetchFromIdp: () => Promise<SharedToken>;
  /**
   * Ends a wait for another replica's fetch (shutdown, the source stopped): the call then
   * rejects with the signal's reason instead of polling on until the lock times out.
   */
  signal?: AbortSignal | undefined;
}

export interface SharedTokenCache {
  /**
   * A fresh token from Redis, or one fetched by this replica under a cross-replica lock and
   * stored for the others. Never fails because of Redis: on any Redis problem it calls
   * `fetchFromIdp` directly. Rejects only with what `fetchFromIdp` rejects with.
   */
  getOrFetch(args: GetOrFetchArgs): Promise<SharedToken>;
  /** Connection state, for /status and metrics. */
  state(): RedisState;
  /** Closes the Redis connection; getOrFetch then fetches locally. */
  close(): Promise<void>;
}
