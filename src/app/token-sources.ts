/**
 * What every generation's token registry draws on for the app's whole life: the dispatcher pool,
 * when `tokenCache.redis` is set, the Redis-shared token cache, and the upstreams' pacers.
 */

import { systemClock } from "../base/clock.js";
import { rulesNameCallers } from "../callers/allow.js";
import type { ProxyConfig, UpstreamConfig } from "../config/proxy-config.js";
import { createDispatcherPool, type DispatcherPool } from "../net/dispatcher-pool.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Tracing } from "../observability/tracing.js";
import { createPacers, type Pacers } from "../pacing/pacers.js";
import { createRedisTokenCache } from "../token/redis-token-cache.js";
import type { SharedTokenCache } from "../token/shared-token-cache.js";
import { createSharedTokenSourceFactory } from "../token/shared-token-source.js";
import { createTokenRegistry, type TokenRegistry } from "../token/token-registry.js";

export interface TokenSources {
  /** One pool for the app's life: a reload gets the dispatchers of unchanged settings back. */
  pool: DispatcherPool;
  sharedCache: SharedTokenCache | undefined;
  /** One pacer per upstream (`rateLimit`, and the upstream's own pauses), kept across reloads. */
  pacers: Pacers;
  /** A configuration's token registry, adopting the sources of unchanged credentials. */
  tokensFor(config: ProxyConfig, adoptFrom?: TokenRegistry): TokenRegistry;
}

export function buildTokenSources(
  config: ProxyConfig,
  deps: { logger: Logger; metrics: Metrics; tracing?: Tracing | undefined },
): TokenSources {
  const { logger, metrics } = deps;
  const pool = createDispatcherPool(config);
  const sharedCache = config.tokenCache.redis
    ? createRedisTokenCache({ config: config.tokenCache.redis, logger, metrics })
    : undefined;
  const tokensFor = (next: ProxyConfig, adoptFrom?: TokenRegistry): TokenRegistry =>
    createTokenRegistry({
      upstreams: next.upstreams,
      maxSources: next.tokenCache.maxSources,
      eagerLimit: next.tokenCache.eagerLimit,
      tracing: deps.tracing,
      // The token endpoint may be another host with its own TLS settings (UpstreamConfig.token.tls).
      dispatcherFor: (upstream: UpstreamConfig) => pool.forTokenEndpoint(upstream),
      clock: systemClock,
      logger,
      metrics,
      ...(sharedCache ? { createSource: createSharedTokenSourceFactory(sharedCache) } : {}),
      adoptFrom,
    });
  const pacers = createPacers(config, {
    logger,
    metrics,
    namesCallers: (upstream) => rulesNameCallers(upstream.allow),
  });
  return { pool, sharedCache, pacers, tokensFor };
}
