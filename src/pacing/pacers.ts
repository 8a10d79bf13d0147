/**
 * Pacing for the app's whole life (issue 26): one pacer per upstream, built from its `rateLimit`
 * (local, or shared through the replicas' Redis), and one for every upstream without a limit
 * too, so an upstream's "slow down" (429/503 with Retry-After) holds its traffic either way.
 * Pauses live in one table for the app (pause.ts): each entry honours its own key and its
 * credential's at its origin, and writes the one its `pauseScope` names (issue 30 item 4).
 *
 * A reload keeps the pacer of every upstream whose pacing settings are unchanged (its queue,
 * budgets and retry window carry over) and builds the others; the replaced ones close once the
 * requests of the old configuration are done (`retain`).
 */

import {
  describeRedisTarget,
  openRedisClient,
  type RedisClientHandle,
  redisClientTiming,
} from "../base/redis-clients.js";
import { localCredentialKey } from "../config/credential-identity.js";
import type { ProxyConfig, RedisCacheConfig, UpstreamConfig } from "../config/proxy-config.js";
import { errorMessage } from "../errors.js";
import { createLogThrottle } from "../observability/log-throttle.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Pacer } from "./limiter.js";
import { createLocalPacer } from "./local-pacer.js";
import { isWorthShowing, type RateLimitStatus, rateLimitStatus } from "./pacing-status.js";
import {
  createEntryPauses,
  createPauseTable,
  credentialPauseKey,
  entryPauseKey,
  type PauseKeys,
} from "./pause.js";
import { createSharedPacer, type PacingRedis } from "./shared-pacer.js";
import { createUpstreamPacing, type UpstreamPacing } from "./upstream-pacing.js";

/** One configuration's pacing, by upstream name. */
export interface PacingTable {
  pacingFor(upstreamName: string): UpstreamPacing | undefined;
  /** For /status: undefined when there is nothing to show (no limit, no pause, no retries). */
  statusOf(upstreamName: string): RateLimitStatus | undefined;
  /** Every pacing in the table. */
  all(): Iterable<UpstreamPacing>;
}

export interface Pacers {
  /** `config`'s pacing: the pacers of unchanged settings are the ones already running. */
  tableFor(config: ProxyConfig): PacingTable;
  /** Closes every pacer none of `inUse` holds (after a reload retired the old configuration). */
  retain(inUse: readonly PacingTable[]): void;
  /** Closes every pacer and the pacing's Redis connection. */
  close(): Promise<void>;
}

/** A Redis failure is logged at warn at most this often (each pacer reports one per second). */
const REDIS_WARN_INTERVAL_MS = 60_000;

export interface PacersDeps {
  logger: Logger;
  metrics: Metrics;
  /**
   * Whether an `allow` rule of the upstream identifies callers (user, serviceAccount,
   * namespace), so that `rateLimit.by: caller` has callers to count by: the callers room knows.
   */
  namesCallers(upstream: UpstreamConfig): boolean;
}

export function createPacers(config: ProxyConfig, deps: PacersDeps): Pacers {
  const { logger, metrics, namesCallers } = deps;
  const pauses = createPauseTable();
  /** Every pacing built and not closed yet, by upstream name and settings. */
  const built = new Map<string, UpstreamPacing>();
  // tokenCache.redis can't change without a restart (reload/live-changes.ts): fixed for life.
  const redisConfig = config.tokenCache.redis;
  let redis: RedisClientHandle | undefined;
  const redisWarnings = createLogThrottle(REDIS_WARN_INTERVAL_MS);

  metrics.watchRateLimitQueues(() => queueDepths(built.values()));

  function pacingRedis(settings: RedisCacheConfig): () => PacingRedis | undefined {
    // A connection of its own (same settings as the token cache): opened only when some
    // upstream paces across replicas. node-redis clients of every topology have eval/evalSha.
    redis ??= openRedisClient(
      settings,
      { onReady: () => {}, onError: () => {} },
      redisClientTiming(settings.commandTimeoutMs),
    );
    const handle = redis;
    return () => (handle.isReady() ? (handle.client() as PacingRedis | undefined) : undefined);
  }

  function onRedisError(upstream: string, err: unknown): void {
    const fields = {
      upstream,
      redis: redisConfig ? describeRedisTarget(redisConfig) : undefined,
      reason: errorMessage(err),
    };
    const message = "shared rate limit: Redis failed; this replica paces alone for now";
    redisWarnings.count();
    if (redisWarnings.takeIfDue() === undefined) logger.debug(fields, message);
    else logger.warn(fields, message);
  }

  function build(upstream: UpstreamConfig, pauseKeys: PauseKeys): UpstreamPacing {
    const { rateLimit } = upstream;
    const entryPauses = createEntryPauses(pauses, pauseKeys);
    let pacer: Pacer;
    if (rateLimit?.scope === "shared" && redisConfig) {
      pacer = createSharedPacer({
        rate: { requests: rateLimit.requests, perMs: rateLimit.perMs, burst: rateLimit.burst },
        waitMs: rateLimit.waitMs,
        redis: pacingRedis(redisConfig),
        keyPrefix: `${redisConfig.keyPrefix}pace:${upstream.name}:`,
        commandTimeoutMs: redisConfig.commandTimeoutMs,
        onRedisError: (err) => onRedisError(upstream.name, err),
        pauses: entryPauses,
      });
    } else {
      pacer = createLocalPacer({
        rate: rateLimit && {
          requests: rateLimit.requests,
          perMs: rateLimit.perMs,
          burst: rateLimit.burst,
        },
        waitMs: rateLimit?.waitMs ?? upstream.pause.waitMs,
        pauses: entryPauses,
      });
    }
    if (rateLimit?.by === "caller" && !namesCallers(upstream)) {
      logger.info(
        { upstream: upstream.name },
        "rateLimit.by is caller, but no allow rule of this upstream identifies callers (user, serviceAccount, namespace): each peer address gets its own budget",
      );
    }
    return createUpstreamPacing({
      upstream: upstream.name,
      pacer,
      rateLimit,
      maxPauseMs: upstream.pause.maxPauseMs,
      retry: upstream.retry,
      metrics,
    });
  }

  function tableFor(next: ProxyConfig): PacingTable {
    const byName = new Map<string, { pacing: UpstreamPacing; upstream: UpstreamConfig }>();
    for (const upstream of next.upstreams) {
      const pauseKeys: PauseKeys = {
        entry: entryPauseKey(upstream.name),
        credential: credentialPauseKey(upstream.origin, localCredentialKey(upstream)),
        scope: upstream.pause.scope,
      };
      const key = settingsKey(upstream, pauseKeys, namesCallers);
      let pacing = built.get(key);
      if (pacing === undefined) {
        pacing = build(upstream, pauseKeys);
        built.set(key, pacing);
      }
      byName.set(upstream.name, { pacing, upstream });
    }
    return {
      pacingFor: (name) => byName.get(name)?.pacing,
      statusOf(name) {
        const entry = byName.get(name);
        if (entry === undefined) return undefined;
        const { pacing, upstream } = entry;
        const status = rateLimitStatus(
          {
            rateLimit: upstream.rateLimit,
            retry: upstream.retry,
            state: pacing.pacer.state(),
            budget: pacing.budget.state(),
          },
          Date.now(),
        );
        return isWorthShowing(status) ? status : undefined;
      },
      *all() {
        for (const entry of byName.values()) yield entry.pacing;
      },
    };
  }

  function retain(inUse: readonly PacingTable[]): void {
    const kept = new Set<UpstreamPacing>();
    for (const table of inUse) for (const pacing of table.all()) kept.add(pacing);
    for (const [key, pacing] of built) {
      if (kept.has(pacing)) continue;
      built.delete(key);
      pacing.pacer.close();
    }
  }

  async function close(): Promise<void> {
    for (const pacing of built.values()) pacing.pacer.close();
    built.clear();
    await redis?.close(redisConfig?.commandTimeoutMs ?? 500);
    redis = undefined;
  }

  return { tableFor, retain, close };
}

/** Everything a pacer is built from: a change to any of it builds a new one. */
function settingsKey(
  upstream: UpstreamConfig,
  pauseKeys: PauseKeys,
  namesCallers: PacersDeps["namesCallers"],
): string {
  return JSON.stringify([
    upstream.name,
    pauseKeys,
    upstream.pause,
    upstream.rateLimit ?? null,
    upstream.retry,
    // The start line about `by: caller` depends on the rules.
    upstream.rateLimit?.by === "caller" ? namesCallers(upstream) : null,
  ]);
}

/** Waiting requests by upstream: every limited upstream (0 too), others only while some wait. */
function queueDepths(all: Iterable<UpstreamPacing>): Map<string, number> {
  const depths = new Map<string, number>();
  for (const pacing of all) {
    const queued = pacing.pacer.state().queued;
    if (queued === 0 && pacing.rateLimit === undefined) continue;
    depths.set(pacing.upstream, (depths.get(pacing.upstream) ?? 0) + queued);
  }
  return depths;
}
