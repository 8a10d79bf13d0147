/**
 * The node-redis client for each Redis topology the house supports (`tokenCache.redis`: the
 * shared token cache, and the shared pacers): one node (`createClient`), Redis Cluster
 * (`createCluster`) and Sentinel (`createSentinel`), behind one small handle. Credentials and
 * TLS come from the target the same way for all three; offline queues are off everywhere, so a
 * command to a node that is down fails at once instead of waiting for it. Health bookkeeping is
 * redis-connection.ts's job; this file only opens, reports and closes.
 */
import { createRequire } from "node:module";

/** Redis behind Sentinel. */
export interface RedisSentinelTarget {
  masterName: string;
  /** Sentinel addresses. */
  nodes: readonly { host: string; port: number }[];
  username: string | undefined;
  password: string | undefined;
  sentinelUsername: string | undefined;
  sentinelPassword: string | undefined;
  tls: boolean;
}

/** Where Redis is: exactly one of url, clusterNodes and sentinel is set. */
export interface RedisTarget {
  /** One Redis node. */
  url?: string | undefined;
  /** Redis Cluster seed nodes (redis:// or rediss:// URLs sharing scheme and credentials). */
  clusterNodes?: readonly string[] | undefined;
  sentinel?: RedisSentinelTarget | undefined;
}

/** The commands the cache sends, as every node-redis client type offers them. */
export interface RedisClientLike {
  get(key: string): Promise<string | null>;
  set(
    key: string,
    value: string,
    options: { condition?: "NX"; expiration: { type: "PX"; value: number } },
  ): Promise<string | null>;
  eval(script: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
}

/** What the client reports; both may be called many times. */
export interface RedisClientEvents {
  /** Connected (again) and ready for commands. */
  onReady(): void;
  /** A connection or discovery problem; the client keeps trying on its own. */
  onError(err: unknown): void;
}

export interface RedisClientTiming {
  connectTimeoutMs: number;
  /** Delay before reconnect attempt `retries` (0-based). */
  reconnectDelayMs(retries: number): number;
}

export interface RedisClientHandle {
  /** The client, or undefined while a cluster/sentinel client is being created again. */
  client(): RedisClientLike | undefined;
  isReady(): boolean;
  /** Closes gracefully within `timeoutMs`, then forcibly. */
  close(timeoutMs: number): Promise<void>;
}

/** Bound on opening a connection (and on a cold start's wait for it), at least this. */
const MIN_CONNECT_TIMEOUT_MS = 2_000;
const RECONNECT_BASE_MS = 100;
const RECONNECT_MAX_MS = 2_000;
const RECONNECT_JITTER_MS = 100;

/**
 * The timing every client of the house uses: connecting is bounded by four command timeouts
 * (at least 2 s), reconnects back off exponentially from 100 ms to 2 s, with jitter.
 */
export function redisClientTiming(commandTimeoutMs: number): RedisClientTiming {
  return {
    connectTimeoutMs: Math.max(4 * commandTimeoutMs, MIN_CONNECT_TIMEOUT_MS),
    reconnectDelayMs: (retries) =>
      Math.min(RECONNECT_BASE_MS * 2 ** retries, RECONNECT_MAX_MS) +
      Math.floor(Math.random() * RECONNECT_JITTER_MS),
  };
}

/**
 * How often a sentinel client asks the sentinels for the topology besides listening to their
 * `+switch-master` events: a safety net for an event lost while a sentinel restarted.
 */
const SENTINEL_SCAN_INTERVAL_MS = 10_000;
/** A cluster or sentinel connect that takes longer than this is abandoned and started over. */
const CONNECT_ATTEMPT_MAX_MS = 30_000;

/** The parts of a node-redis client the handle drives (all three types have them). */
interface NodeRedisClient extends RedisClientLike {
  readonly isReady: boolean;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  connect(): Promise<unknown>;
  close(): Promise<unknown>;
  destroy(): unknown;
}

/**
 * node-redis, loaded on first use: most deployments have no Redis, and loading it costs
 * ~4.5 MiB of heap and ~20 MiB of RSS in every process (measured).
 */
function loadRedis(): typeof import("redis") {
  return createRequire(import.meta.url)("redis") as typeof import("redis");
}

/** host:port of a Redis URL, without credentials, for logs. */
export function describeRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.hostname}:${parsed.port || "6379"}`;
  } catch {
    return "redis";
  }
}

/** Where Redis is, for logs and /status: never credentials. */
export function describeRedisTarget(config: RedisTarget): string {
  if (config.clusterNodes) {
    return `redis cluster ${config.clusterNodes.map(describeRedisUrl).join(",")}`;
  }
  if (config.sentinel) {
    const nodes = config.sentinel.nodes.map((n) => `${n.host}:${n.port}`).join(",");
    return `redis sentinel ${config.sentinel.masterName} via ${nodes}`;
  }
  return describeRedisUrl(config.url ?? "");
}

/** Creates the client for `config`'s topology and starts connecting; never throws on Redis errors. */
export function openRedisClient(
  config: RedisTarget,
  events: RedisClientEvents,
  timing: RedisClientTiming,
): RedisClientHandle {
  const socket = {
    connectTimeout: timing.connectTimeoutMs,
    reconnectStrategy: (retries: number) => timing.reconnectDelayMs(retries),
  };
  if (config.clusterNodes) {
    const nodes = config.clusterNodes;
    return keepConnecting((gated) => createClusterClient(nodes, socket, gated), events, timing, {
      checkConnected: checkAllSlotsServed,
    });
  }
  if (config.sentinel) {
    const sentinel = config.sentinel;
    return keepConnecting((gated) => createSentinelClient(sentinel, socket, gated), events, timing);
  }
  return singleNode(config.url ?? "", socket, events);
}

type SocketTiming = {
  connectTimeout: number;
  reconnectStrategy: (retries: number) => number;
};

/** One node: node-redis reconnects by itself forever, so one client lives as long as the cache. */
function singleNode(
  url: string,
  socket: SocketTiming,
  events: RedisClientEvents,
): RedisClientHandle {
  const client = loadRedis().createClient({
    url,
    disableOfflineQueue: true,
    socket,
  }) as unknown as NodeRedisClient;
  // Without an 'error' listener node-redis errors would crash the process.
  client.on("error", (err) => events.onError(err));
  client.on("ready", () => events.onReady());
  client.connect().catch(() => {
    // Connection errors arrive through the 'error' listener; reconnecting goes on by itself.
  });
  return {
    client: () => client,
    isReady: () => client.isReady,
    close: (timeoutMs) => closeClient(client, timeoutMs),
  };
}

/** Credentials and TLS of the cluster's seed URLs (validation made them agree). */
function clusterDefaults(urls: readonly string[]): {
  username?: string;
  password?: string;
  tls: boolean;
} {
  const first = new URL(urls[0] ?? "redis://localhost");
  return {
    ...(first.username !== "" && { username: decodeURIComponent(first.username) }),
    ...(first.password !== "" && { password: decodeURIComponent(first.password) }),
    tls: first.protocol === "rediss:",
  };
}

/**
 * node-redis uses `rootNodes` only to discover the topology: the connections to the nodes it
 * finds are built from `defaults` alone (node-redis PR #3327), so credentials and TLS must be
 * repeated there or every node connection goes out plaintext and unauthenticated.
 */
function createClusterClient(
  urls: readonly string[],
  socket: SocketTiming,
  events: RedisClientEvents,
): NodeRedisClient {
  const { tls, ...credentials } = clusterDefaults(urls);
  const cluster = loadRedis().createCluster({
    rootNodes: urls.map((url) => ({ url })),
    defaults: {
      ...credentials,
      disableOfflineQueue: true,
      socket: { ...socket, ...(tls && { tls: true as const }) },
    },
    // Reads go to masters: a replica may not have the token or lock another replica just wrote.
    useReplicas: false,
  }) as unknown as NodeRedisClient;
  cluster.on("error", (err) => events.onError(err));
  return cluster;
}

const CLUSTER_SLOTS = 16384;

/**
 * node-redis' cluster connect succeeds against a node that serves no slots yet (a cluster still
 * being created), and then fails every command with a TypeError and never looks at the topology
 * again: such a connect counts as failed here, and is tried again.
 */
function checkAllSlotsServed(client: NodeRedisClient): void {
  const slots = (client as unknown as { slots: readonly unknown[] }).slots;
  let served = 0;
  for (let slot = 0; slot < CLUSTER_SLOTS; slot++) if (slots[slot] !== undefined) served++;
  if (served < CLUSTER_SLOTS) {
    throw new Error(`the cluster serves ${served} of its ${CLUSTER_SLOTS} slots (still forming?)`);
  }
}

/** The sentinels' options: their own credentials, the same TLS setting as the data nodes. */
function createSentinelClient(
  config: RedisSentinelTarget,
  socket: SocketTiming,
  events: RedisClientEvents,
): NodeRedisClient {
  const tls = config.tls ? { tls: true as const } : {};
  const sentinel = loadRedis().createSentinel({
    name: config.masterName,
    sentinelRootNodes: config.nodes.map((n) => ({ host: n.host, port: n.port })),
    nodeClientOptions: {
      ...(config.username !== undefined && { username: config.username }),
      ...(config.password !== undefined && { password: config.password }),
      disableOfflineQueue: true,
      socket: { ...socket, ...tls },
    },
    sentinelClientOptions: {
      ...(config.sentinelUsername !== undefined && { username: config.sentinelUsername }),
      ...(config.sentinelPassword !== undefined && { password: config.sentinelPassword }),
      socket: { ...socket, ...tls },
    },
    masterPoolSize: 1,
    scanInterval: SENTINEL_SCAN_INTERVAL_MS,
  }) as unknown as NodeRedisClient;
  sentinel.on("error", (err) => events.onError(err));
  // Emitted at start and again when a failover to a new master has completed.
  sentinel.on("ready", () => events.onReady());
  return sentinel;
}

/**
 * Cluster and sentinel clients give up when their first connect fails (no root node or no
 * sentinel answered) and can't be reopened after that, so a failed connect makes a new client,
 * after the same backoff the single-node client uses between reconnects.
 */
function keepConnecting(
  create: (events: RedisClientEvents) => NodeRedisClient,
  events: RedisClientEvents,
  timing: RedisClientTiming,
  options: { checkConnected?: (client: NodeRedisClient) => void } = {},
): RedisClientHandle {
  let current: NodeRedisClient | undefined;
  // Only a client whose connect resolved (and passed checkConnected) takes commands.
  let connected = false;
  let closed = false;
  let retryTimer: NodeJS.Timeout | undefined;
  // A sentinel client says 'ready' just before its connect resolves: not ready for us yet.
  const gated: RedisClientEvents = {
    onReady: () => {
      if (connected) events.onReady();
    },
    onError: (err) => events.onError(err),
  };

  const attempt = (retries: number): void => {
    if (closed) return;
    const client = create(gated);
    current = client;
    connected = false;
    let abandon: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      abandon = setTimeout(
        () => reject(new Error(`no connection within ${CONNECT_ATTEMPT_MAX_MS} ms`)),
        CONNECT_ATTEMPT_MAX_MS,
      );
    });
    Promise.race([client.connect(), deadline])
      .then(() => {
        if (closed) return;
        options.checkConnected?.(client);
        connected = true;
        events.onReady();
      })
      .catch((err: unknown) => {
        if (closed) return;
        events.onError(err);
        current = undefined;
        try {
          client.destroy();
        } catch {
          // Already torn down by its own failed connect.
        }
        retryTimer = setTimeout(() => attempt(retries + 1), timing.reconnectDelayMs(retries));
      })
      .finally(() => clearTimeout(abandon));
  };
  attempt(0);

  return {
    client: () => current,
    isReady: () => connected && current?.isReady === true,
    async close(timeoutMs) {
      closed = true;
      clearTimeout(retryTimer);
      if (current) await closeClient(current, timeoutMs);
      current = undefined;
    },
  };
}

/** close() waits for pending replies, which a stopped server never sends: bound it. */
async function closeClient(client: NodeRedisClient, timeoutMs: number): Promise<void> {
  const destroy = () => {
    try {
      client.destroy();
    } catch {
      // Already closed.
    }
  };
  if (!client.isReady) {
    destroy();
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, timeoutMs);
  });
  const closed = client.close().then(
    () => true,
    () => false,
  );
  const done = await Promise.race([closed, timedOut.then(() => false)]);
  clearTimeout(timer);
  if (!done) destroy();
}
