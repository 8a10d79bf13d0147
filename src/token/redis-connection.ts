/**
 * The health of the shared token cache's Redis connection, whatever the topology
 * (redis-clients.ts opens the node-redis client). Every command is bounded by commandTimeoutMs
 * and never queued while offline, so a dead or slow Redis costs a request at most one timeout;
 * after a failure Redis is skipped until it reconnects or a short probe delay passes. State
 * changes are logged once per transition and mirrored in `bearer_proxy_redis_up`.
 */
import type { RedisCacheConfig } from "../config/types.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import { describeRedisTarget, openRedisClient, type RedisClientLike } from "./redis-clients.js";
import type { RedisCacheState } from "./redis-types.js";

/** After a failed command on a live socket (a slow Redis), skip Redis this long before retrying. */
const PROBE_DELAY_MS = 1_000;
/** Bound on opening a connection, and on the first requests' wait for it at start-up. */
const MIN_CONNECT_TIMEOUT_MS = 2_000;
const RECONNECT_BASE_MS = 100;
const RECONNECT_MAX_MS = 2_000;
const RECONNECT_JITTER_MS = 100;

/** The few commands the cache uses, typed loosely enough to not depend on node-redis generics. */
export interface RedisCommands {
  get(key: string): Promise<string | null>;
  setNx(key: string, value: string, ttlMs: number): Promise<boolean>;
  setPx(key: string, value: string, ttlMs: number): Promise<void>;
  /** Deletes `key` only if it still holds `value`; true if it did. */
  deleteIfEquals(key: string, value: string): Promise<boolean>;
}

/** Thrown by `run` when Redis can't be used; callers fall back to fetching locally. */
export class RedisUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "RedisUnavailableError";
  }
}

export interface RedisConnection {
  /** Runs commands against Redis, or throws RedisUnavailableError without waiting when it's down. */
  run<T>(work: (commands: RedisCommands) => Promise<T>): Promise<T>;
  state(): RedisCacheState;
  close(): Promise<void>;
}

export interface RedisConnectionOptions {
  config: RedisCacheConfig;
  logger: Logger;
  metrics?: Metrics | undefined;
  /** Monotonic ms for the probe delay; default performance.now. */
  monotonicNow?: () => number;
}

// Compare-and-delete: only the replica that still owns the lock may release it.
const DELETE_IF_EQUALS = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`;

/** Rejects after `timeoutMs`; a late outcome of `command` is ignored. */
function withTimeout<T>(command: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`redis command timed out after ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  command.catch(() => {}); // a reply failing after we gave up must not become an unhandled rejection
  return Promise.race([command, timedOut]).finally(() => clearTimeout(timer));
}

/** Creates the client and starts connecting in the background; never throws on Redis errors. */
export function connectRedis(options: RedisConnectionOptions): RedisConnection {
  const { config, logger, metrics } = options;
  const now = options.monotonicNow ?? (() => performance.now());
  const target = describeRedisTarget(config);
  const connectTimeoutMs = Math.max(4 * config.commandTimeoutMs, MIN_CONNECT_TIMEOUT_MS);
  let current: RedisCacheState = "connecting";
  let closed = false;
  let skipUntilMs = 0;
  metrics?.redisUp.set(0);

  let settleFirstAttempt: () => void = () => {};
  const firstAttempt = new Promise<void>((resolve) => {
    settleFirstAttempt = resolve;
  });

  function markUp(): void {
    settleFirstAttempt();
    skipUntilMs = 0;
    if (current === "up" || closed) return;
    logger.info(
      { redis: target },
      current === "down"
        ? "redis token cache is reachable again; sharing tokens across replicas"
        : "redis token cache connected",
    );
    current = "up";
    metrics?.redisUp.set(1);
  }

  function markDown(reason: unknown): void {
    settleFirstAttempt();
    skipUntilMs = now() + PROBE_DELAY_MS;
    if (current === "down" || closed) return;
    current = "down";
    metrics?.redisUp.set(0);
    logger.warn(
      { redis: target, reason: errorMessage(reason) },
      "redis token cache unavailable; fetching tokens locally until it is back",
    );
  }

  const handle = openRedisClient(
    config,
    { onReady: markUp, onError: markDown },
    {
      connectTimeoutMs,
      reconnectDelayMs: (retries) =>
        Math.min(RECONNECT_BASE_MS * 2 ** retries, RECONNECT_MAX_MS) +
        Math.floor(Math.random() * RECONNECT_JITTER_MS),
    },
  );

  // node-redis' own `timeout` command option only covers the wait before a command is written,
  // not the wait for its reply (a stopped or overloaded server), so bound each command here.
  const bounded = <T>(command: Promise<T>): Promise<T> =>
    withTimeout(command, config.commandTimeoutMs);
  const px = (ttlMs: number) => ({ type: "PX" as const, value: Math.max(1, Math.ceil(ttlMs)) });
  const commandsOf = (client: RedisClientLike): RedisCommands => ({
    get: (key) => bounded(client.get(key)),
    setNx: async (key, value, ttlMs) =>
      (await bounded(client.set(key, value, { condition: "NX", expiration: px(ttlMs) }))) === "OK",
    setPx: async (key, value, ttlMs) => {
      await bounded(client.set(key, value, { expiration: px(ttlMs) }));
    },
    deleteIfEquals: async (key, value) =>
      (await bounded(client.eval(DELETE_IF_EQUALS, { keys: [key], arguments: [value] }))) === 1,
  });

  async function waitForFirstAttempt(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, connectTimeoutMs);
    });
    await Promise.race([firstAttempt, timedOut]);
    clearTimeout(timer);
    if (current === "connecting") markDown(new Error("no connection within the connect timeout"));
  }

  return {
    async run(work) {
      if (closed) throw new RedisUnavailableError("redis token cache is closed");
      // A cold replica waits for its first connection (refused: at once; unanswered: up to the
      // connect timeout) so that a burst right after a rollout still makes one token request.
      if (current === "connecting") await waitForFirstAttempt();
      const client = handle.client();
      if (!client || !handle.isReady()) throw new RedisUnavailableError("redis is not connected");
      if (current === "down" && now() < skipUntilMs) {
        throw new RedisUnavailableError("redis failed recently; skipping it");
      }
      try {
        const result = await work(commandsOf(client));
        markUp();
        return result;
      } catch (err) {
        markDown(err);
        throw new RedisUnavailableError("redis command failed", { cause: err });
      }
    },
    state: () => current,
    async close() {
      if (closed) return;
      closed = true;
      current = "down";
      settleFirstAttempt();
      metrics?.redisUp.set(0);
      await handle.close(config.commandTimeoutMs);
    },
  };
}
