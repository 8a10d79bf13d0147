/**
 * Semantic checks of `upstreams[].rateLimit` and `.retry` that the schema cannot express: a
 * period of zero (an infinite rate), a shared limiter with no Redis to share it through. Done
 * without contacting Redis, so `validate` answers offline.
 */

import { type IssueList, isObject } from "./issues.js";
import { durationIsZero } from "./validate-durations.js";

export function validatePacing(doc: Record<string, unknown>, issues: IssueList): void {
  const upstreams = Array.isArray(doc.upstreams) ? doc.upstreams : [];
  const tokenCache = isObject(doc.tokenCache) ? doc.tokenCache : {};
  const hasRedis = isObject(tokenCache.redis);
  upstreams.forEach((upstream, i) => {
    if (!isObject(upstream) || !isObject(upstream.rateLimit)) return;
    const at = ["upstreams", i, "rateLimit"];
    const { per, scope } = upstream.rateLimit;
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
