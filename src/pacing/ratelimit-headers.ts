/**
 * The `RateLimit-Policy` and `RateLimit` response fields (issue 26), in the structured-field
 * form of draft-ietf-httpapi-ratelimit-headers-11 (May 2026; the List/Item form arrived in -08
 * and is unchanged since): `RateLimit-Policy: "default";q=20;w=1` and
 * `RateLimit: "default";r=4;t=1`. Both are Lists of Items whose value is the policy name as an
 * sf-string; `q` and `w` (whole seconds, no sub-second precision) describe the quota, `r` is the
 * quota available now and `t` the seconds within which no more than `r` may be used. A pacer's
 * `r` grows continuously, so `t` here is the time until the whole allowance is back, rounded up.
 */
import type { Admission } from "./limiter.js";

/**
 * The policy a pacer advertises. An upstream that sends RateLimit fields of its own may use the
 * same name: append ours to its List under another name, or replace its fields.
 */
export const POLICY_NAME = "default";

/** `RateLimit-Policy` for `requests` per `perMs` (`per` should be whole seconds; else rounded). */
export function rateLimitPolicyValue(requests: number, perMs: number, name = POLICY_NAME): string {
  const windowSeconds = Math.max(1, Math.round(perMs / 1000));
  return `"${name}";q=${Math.floor(requests)};w=${windowSeconds}`;
}

/**
 * `RateLimit` for an admission: what is left after it, or r=0 with `t` equal to Retry-After on
 * a refusal (the draft: Retry-After should not point before the end of the effective window).
 * Undefined for an admission of a pacer without a limit (nothing to advertise).
 */
export function rateLimitValue(admission: Admission, name = POLICY_NAME): string | undefined {
  if (!admission.ok) return `"${name}";r=0;t=${admission.retryAfterSeconds}`;
  const { remaining, resetSeconds } = admission;
  if (!Number.isFinite(remaining)) return undefined;
  if (
    name !== POLICY_NAME ||
    !isCached(remaining, MAX_CACHED_R) ||
    !isCached(resetSeconds, MAX_CACHED_T)
  ) {
    return `"${name}";r=${remaining};t=${resetSeconds}`;
  }
  // Every admitted request answers with one: a steady upstream repeats a handful of (r, t)
  // pairs, so the value is made once per pair, not built (and flattened by node:http) per request.
  const slot = remaining * (MAX_CACHED_T + 1) + resetSeconds;
  let value = admittedValues[slot];
  if (value === undefined) {
    value = `"${name}";r=${remaining};t=${resetSeconds}`;
    admittedValues[slot] = value;
  }
  return value;
}

/** (r, t) pairs of the default policy kept made: r up to a burst of 63, t up to a minute. */
const MAX_CACHED_R = 64;
const MAX_CACHED_T = 60;
const admittedValues: (string | undefined)[] = new Array((MAX_CACHED_R + 1) * (MAX_CACHED_T + 1));

/** A whole number in 0…max (a shared pacer's figures come from Redis: checked, not assumed). */
function isCached(n: number, max: number): boolean {
  return Number.isInteger(n) && n >= 0 && n <= max;
}
