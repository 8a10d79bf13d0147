/**
 * A token cache shared by all replicas through Redis (issue 6): a token fetched by one replica is
 * used by all until its refresh point, and a cross-replica lock (`SET NX PX`) lets one replica
 * ask the token endpoint while the others wait and read Redis. Tokens are stored encrypted with
 * a key derived from the client secret (redis-crypto.ts). Any Redis problem falls back to a local
 * fetch: a Redis outage never fails a request.
 *
 * Keys: `<prefix>token:{<credentialKey>}` (the encrypted token, PX = time to expiry) and
 * `<prefix>lock:{<credentialKey>}` (a random owner id, PX = lockTtlMs). The braces are a Redis
 * Cluster hash tag: only the credential key picks the slot, so a credential's token and lock
 * live on one node and the lock script (which touches one key) can run anywhere. The same keys
 * are used on a single node and behind Sentinel.
 */

import { randomBytes } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { fingerprint, hashValue } from "../base/fingerprint.js";
import { describeRedisTarget } from "../base/redis-clients.js";
import {
  connectRedis,
  type RedisCommands,
  type RedisConnectionOptions,
  RedisUnavailableError,
} from "../base/redis-connection.js";
import type { RedisCacheConfig } from "../config/proxy-config.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import { decryptToken, deriveTokenKey, encryptToken } from "./redis-crypto.js";
import type { GetOrFetchArgs, SharedToken, SharedTokenCache } from "./shared-token-cache.js";

/** How often a replica waiting for another's fetch looks at Redis again, plus random jitter. */
const POLL_INTERVAL_MS = 50;
const POLL_JITTER_MS = 25;
/** Waiting for other replicas is bounded by this many lock lifetimes, then we fetch ourselves. */
const MAX_WAIT_LOCK_TTLS = 2;

export interface RedisTokenCacheOptions {
  config: RedisCacheConfig;
  logger: Logger;
  metrics?: Metrics | undefined;
  /** Wall clock in ms (default Date.now): token times are wall times shared across replicas. */
  now?: () => number;
  /**
   * Waits between polls (default an abortable setTimeout); total waiting is counted in slept
   * ms. Must reject when `signal` aborts.
   */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

type Attempt = { kind: "fresh"; token: SharedToken } | { kind: "locked" } | { kind: "acquired" };

/** Per-call context: keys and the decryption key for one credential. */
interface Slot {
  args: GetOrFetchArgs;
  aesKey: Buffer;
  tokenKey: string;
  lockKey: string;
  lockOwner: string;
}

// Rejects with the signal's own reason, as throwIfAborted does (timers/promises wraps it).
const defaultSleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  delay(ms, undefined, { signal }).catch((err: unknown) => {
    throw signal?.aborted ? signal.reason : err;
  });

/** The Redis key of a credential's token; `{…}` is the cluster hash tag (see above). */
export function tokenKeyOf(keyPrefix: string, credentialKey: string): string {
  return `${keyPrefix}token:{${credentialKey}}`;
}

/** The Redis key of a credential's fetch lock, in the same slot as its token. */
export function lockKeyOf(keyPrefix: string, credentialKey: string): string {
  return `${keyPrefix}lock:{${credentialKey}}`;
}

/**
 * Each transition of the cache's Redis connection, logged once and mirrored in
 * `bearer_proxy_redis_up` (0 until the first connection).
 */
function logRedisState(
  config: RedisCacheConfig,
  logger: Logger,
  metrics: Metrics | undefined,
): NonNullable<RedisConnectionOptions["onStateChange"]> {
  const target = describeRedisTarget(config);
  metrics?.redisUp.set(0);
  return (next, previous, reason) => {
    if (next === "up") {
      logger.info(
        { redis: target },
        previous === "down"
          ? "redis token cache is reachable again; sharing tokens across replicas"
          : "redis token cache connected",
      );
      metrics?.redisUp.set(1);
      return;
    }
    metrics?.redisUp.set(0);
    logger.warn(
      { redis: target, reason: errorMessage(reason) },
      "redis token cache unavailable; fetching tokens locally until it is back",
    );
  };
}

/** Creates the shared cache and starts connecting to Redis in the background. */
export function createRedisTokenCache(options: RedisTokenCacheOptions): SharedTokenCache {
  const { config, logger } = options;
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? defaultSleep;
  const connection = connectRedis({
    target: config,
    commandTimeoutMs: config.commandTimeoutMs,
    onStateChange: logRedisState(config, logger, options.metrics),
  });
  // Concurrent calls in this replica share one trip to Redis (and at most one fetch).
  const inFlight = new Map<string, Promise<SharedToken>>();

  function isFresh(token: SharedToken, args: GetOrFetchArgs): boolean {
    const fraction = Math.min(Math.max(args.refreshFraction, 0), 1);
    const refreshAtWallMs =
      token.obtainedAtWallMs + fraction * (token.expiresAtWallMs - token.obtainedAtWallMs);
    if (now() >= refreshAtWallMs || now() >= token.expiresAtWallMs) return false;
    return (
      args.rejectFingerprint === undefined ||
      fingerprint(token.accessToken) !== args.rejectFingerprint
    );
  }

  async function readFresh(redis: RedisCommands, slot: Slot): Promise<SharedToken | undefined> {
    const stored = await redis.get(slot.tokenKey);
    if (stored === null) return undefined;
    // Undecryptable (rotated secret, tampering) counts as a miss; our fetch then overwrites it.
    const token = decryptToken(stored, slot.aesKey, slot.args.credentialKey);
    return token !== undefined && isFresh(token, slot.args) ? token : undefined;
  }

  async function attempt(redis: RedisCommands, slot: Slot): Promise<Attempt> {
    const found = await readFresh(redis, slot);
    if (found) return { kind: "fresh", token: found };
    if (!(await redis.setNx(slot.lockKey, slot.lockOwner, config.lockTtlMs)))
      return { kind: "locked" };
    // The previous holder may have stored its token and released the lock between our GET and
    // SET NX; reading again keeps that from becoming a second fetch.
    const stored = await readFresh(redis, slot);
    if (!stored) return { kind: "acquired" };
    await redis.deleteIfEquals(slot.lockKey, slot.lockOwner);
    return { kind: "fresh", token: stored };
  }

  async function fetchAsHolder(slot: Slot): Promise<SharedToken> {
    let token: SharedToken;
    try {
      token = await slot.args.fetchFromIdp();
    } catch (err) {
      // Let the next replica try right away instead of after lockTtlMs.
      await connection
        .run((redis) => redis.deleteIfEquals(slot.lockKey, slot.lockOwner))
        .catch(() => {});
      throw err;
    }
    const ttlMs = token.expiresAtWallMs - now();
    await connection
      .run(async (redis) => {
        if (ttlMs > 0) {
          await redis.setPx(
            slot.tokenKey,
            encryptToken(token, slot.aesKey, slot.args.credentialKey),
            ttlMs,
          );
        }
        await redis.deleteIfEquals(slot.lockKey, slot.lockOwner);
      })
      // We hold a good token; failing to share it must not fail the request.
      .catch(() => {});
    return token;
  }

  async function shareOrFetch(args: GetOrFetchArgs): Promise<SharedToken> {
    const slot: Slot = {
      args,
      aesKey: deriveTokenKey(args.secret, args.credentialKey),
      tokenKey: tokenKeyOf(config.keyPrefix, args.credentialKey),
      lockKey: lockKeyOf(config.keyPrefix, args.credentialKey),
      lockOwner: randomBytes(16).toString("hex"),
    };
    const maxWaitMs = MAX_WAIT_LOCK_TTLS * config.lockTtlMs;
    let waitedMs = 0;
    for (;;) {
      args.signal?.throwIfAborted();
      let result: Attempt;
      try {
        result = await connection.run((redis) => attempt(redis, slot));
      } catch (err) {
        if (!(err instanceof RedisUnavailableError)) throw err;
        return args.fetchFromIdp();
      }
      if (result.kind === "fresh") return result.token;
      if (result.kind === "acquired") return fetchAsHolder(slot);
      if (waitedMs >= maxWaitMs) {
        logger.warn(
          { credential: fingerprint(args.credentialKey), waitedMs },
          "waited too long for another replica's token fetch; fetching locally",
        );
        return args.fetchFromIdp();
      }
      const delayMs = POLL_INTERVAL_MS + Math.floor(Math.random() * POLL_JITTER_MS);
      await sleep(delayMs, args.signal);
      waitedMs += delayMs;
    }
  }

  return {
    getOrFetch(args) {
      const flightKey = `${args.credentialKey}\n${args.rejectFingerprint ?? ""}\n${hashValue(args.secret)}`;
      const existing = inFlight.get(flightKey);
      if (existing) return existing;
      const pending = shareOrFetch(args).finally(() => inFlight.delete(flightKey));
      inFlight.set(flightKey, pending);
      return pending;
    },
    state: () => connection.state(),
    close() {
      options.metrics?.redisUp.set(0);
      return connection.close();
    },
  };
}
