/**
 * Semantic checks of `upstreams[].rateLimit` and `.retry` that the schema cannot express: a
 * period of zero (an infinite rate), a shared limiter with no Redis to share it through, a
 * limit's settings without the limit, a `maxPause` that a whole-second Retry-After can't honour.
 * Done without contacting Redis, so `validate` answers offline.
 */

import { type IssueList, isObject } from "./issues.js";
import { parseDurationMs } from "./units.js";
import { durationIsZero } from "./validate-durations.js";

/** Keys that describe our own limit: meaningless without `requests`. */
const LIMIT_KEYS = ["per", "burst", "by", "scope"] as const;

export function validatePacing(doc: Record<string, unknown>, issues: IssueList): void {
  const upstreams = Array.isArray(doc.upstreams) ? doc.upstreams : [];
  const tokenCache = isObject(doc.tokenCache) ? doc.tokenCache : {};
  const hasRedis = isObject(tokenCache.redis);
  upstreams.forEach((upstream, i) => {
    if (!isObject(upstream) || !isObject(upstream.rateLimit)) return;
    const at = ["upstreams", i, "rateLimit"];
    const { per, scope, requests, maxPause } = upstream.rateLimit;
    if (requests === undefined) {
      for (const key of LIMIT_KEYS) {
        if (upstream.rateLimit[key] === undefined) continue;
        issues.add(
          [...at, key],
          `expected rateLimit.requests beside ${key}: without requests there is no limit to shape (only pauseScope, maxPause and wait apply)`,
        );
      }
    }
    const maxPauseMs = durationMs(maxPause);
    if (maxPauseMs !== undefined && maxPauseMs % 1000 !== 0) {
      issues.add(
        [...at, "maxPause"],
        `expected whole seconds such as "60s" (or "0s": never pause), found ${JSON.stringify(maxPause)}: Retry-After counts in seconds, and a refusal's Retry-After must not exceed maxPause`,
      );
    }
    if ((typeof per === "string" || typeof per === "number") && durationIsZero(per)) {
      issues.add(
        [...at, "per"],
        `expected a period above zero such as "1s", found ${JSON.stringify(per)}`,
      );
    }
    if (scope === "shared" && !hasRedis) {
      issues.add(
        [...at, "scope"],
        "expected tokenCache.redis to be set: a shared limit is kept in the Redis the replicas share (or use scope: local)",
      );
    }
  });
}

/** A well-formed duration in ms; undefined when absent or malformed (the schema's to report). */
function durationMs(value: unknown): number | undefined {
  if (typeof value !== "string" && typeof value !== "number") return undefined;
  try {
    return parseDurationMs(value);
  } catch {
    return undefined;
  }
}
