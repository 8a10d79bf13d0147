/**
 * When the cluster's keys are fetched from `jwksUri`, and how long keys that cannot be refreshed
 * are still used. Apart from jwks-source.ts (which loads jose) so that caller-gate.ts can name
 * the retry delay in its 503 without loading jose where no `allow` names callers.
 */

/** After a fetch, an unknown `kid` may trigger the next one only this much later. */
export const JWKS_COOLDOWN_MS = 30_000;
/** Keys are refetched at least this often even when every `kid` is known (removed keys go). */
export const JWKS_MAX_AGE_MS = 10 * 60_000;
/** One JWKS fetch (connect, headers and body) must finish within this. */
export const JWKS_TIMEOUT_MS = 5_000;
/**
 * After a failed fetch the next one waits this long. jose's cooldown counts from a successful
 * fetch only, so without this an outage would send one fetch per service-account caller. Also
 * the `Retry-After` of a 503 `caller_keys_unavailable`: no sooner can the keys be back.
 */
export const JWKS_RETRY_AFTER_FAILURE_MS = 5_000;
/**
 * How old the keys last fetched may grow while every refresh fails before they are no longer
 * used (every service-account caller then gets 503 `caller_keys_unavailable`). Serving keys
 * that cannot be refreshed is safe for rotation (the API server publishes a new key before it
 * signs with it and drops the old one only after its tokens expired), so an outage of the API
 * server, routine during control-plane upgrades, must not refuse callers whose keys are known.
 * What it risks is a key the cluster removed on purpose (a leaked `sa.key`) staying trusted
 * while the gateway cannot hear of it: a day bounds that, and is longer than any upgrade.
 */
export const JWKS_STALE_LIMIT_MS = 24 * 60 * 60_000;
