/**
 * The health of a Redis connection, whatever the topology (redis-clients.ts opens the
 * node-redis client). Every command is bounded by commandTimeoutMs and never queued while
 * offline, so a dead or slow Redis costs a request at most one timeout; after a failure Redis
 * is skipped until it reconnects or a short probe delay passes. Each transition to up or down is
 * told once (the shared token cache logs it and mirrors it in `bearer_proxy_redis_up`).
 */
import {
  openRedisClient,
  type RedisClientLike,
  type RedisTarget,
  redisClientTiming,
} from "./redis-clients.js";
import {
  type CancelTimeout,
  stallTolerantTimeout,
  withStallTolerantTimeout,
} from "./stall-tolerant-timeout.js";

/** After a failed command on a live socket (a slow Redis), skip Redis this long before retrying. */
const PROBE_DELAY_MS = 1_000;

/** "connecting" until the first connection attempt settles, then "up" or "down". */
export type RedisState = "up" | "down" | "connecting";

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
  state(): RedisState;
  close(): Promise<void>;
}

export interface RedisConnectionOptions {
  target: RedisTarget;
  /** Bound on each command's reply; the connect timeout is derived from it (redisClientTiming). */
  commandTimeoutMs: number;
  /**
   * Told once per transition to up or down (from `previous`), never after close; `reason` is
   * the failure that took it down.
   */
  onStateChange?:
    | ((next: "up" | "down", previous: RedisState, reason?: unknown) => void)
    | undefined;
  /** Monotonic ms for the probe delay; default performance.now. */
  monotonicNow?: () => number;
}

// Compare-and-delete: only the replica that still owns the lock may release it.
const DELETE_IF_EQUALS = `if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) else return 0 end`;

/**
 * Rejects after `timeoutMs`; a late outcome of `command` is ignored. A reply that came during a
 * stall of our own loop is read, not timed out.
 */
function withTimeout<T>(command: Promise<T>, timeoutMs: number): Promise<T> {
  return withStallTolerantTimeout(
    command,
    timeoutMs,
    () => new Error(`redis command timed out after ${timeoutMs} ms`),
  );
}

/** Creates the client and starts connecting in the background; never throws on Redis errors. */
export function connectRedis(options: RedisConnectionOptions): RedisConnection {
  const { target, commandTimeoutMs } = options;
  const now = options.monotonicNow ?? (() => performance.now());
  const timing = redisClientTiming(commandTimeoutMs);
  const connectTimeoutMs = timing.connectTimeoutMs;
  let current: RedisState = "connecting";
  let closed = false;
  let skipUntilMs = 0;

  let settleFirstAttempt: () => void = () => {};
  const firstAttempt = new Promise<void>((resolve) => {
    settleFirstAttempt = resolve;
  });

  function markUp(): void {
    settleFirstAttempt();
    skipUntilMs = 0;
    if (current === "up" || closed) return;
    const previous = current;
    current = "up";
    options.onStateChange?.("up", previous);
  }

  function markDown(reason: unknown): void {
    settleFirstAttempt();
    skipUntilMs = now() + PROBE_DELAY_MS;
    if (current === "down" || closed) return;
    const previous = current;
    current = "down";
    options.onStateChange?.("down", previous, reason);
  }

  const handle = openRedisClient(target, { onReady: markUp, onError: markDown }, timing);

  // node-redis' own `timeout` command option only covers the wait before a command is written,
  // not the wait for its reply (a stopped or overloaded server), so bound each command here.
  const bounded = <T>(command: Promise<T>): Promise<T> => withTimeout(command, commandTimeoutMs);
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
    let cancel: CancelTimeout = () => {};
    const timedOut = new Promise<void>((resolve) => {
      cancel = stallTolerantTimeout(connectTimeoutMs, resolve);
    });
    await Promise.race([firstAttempt, timedOut]);
    cancel();
    if (current === "connecting") markDown(new Error("no connection within the connect timeout"));
  }

  return {
    async run(work) {
      if (closed) throw new RedisUnavailableError("the redis connection is closed");
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
      await handle.close(commandTimeoutMs);
    },
  };
}
