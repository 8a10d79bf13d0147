import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { createClient } from "redis";
import { afterAll, afterEach, beforeAll } from "vitest";
import type { RedisCacheConfig } from "../../src/config/proxy-config.js";
import { createLogger, type Logger } from "../../src/observability/logger.js";
import type { SharedToken, SharedTokenCache } from "../../src/token/shared-token-cache.js";
import { freePort } from "./free-port.js";

/**
 * A real redis-server on 127.0.0.1 for tests: no persistence, its own free port, stopped in
 * afterAll. Tests can kill it (SIGKILL), pause it (SIGSTOP, a "slow" Redis) and start it again
 * on the same port.
 */
export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** SIGKILL, like a crashed or evicted pod; resolves when the process is gone. */
  kill(): Promise<void>;
  /** Starts it again on the same port (after kill/stop). */
  restart(): Promise<void>;
  /** SIGSTOP: the socket stays open but nothing answers. */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  stop(): Promise<void>;
}

/** True when `redis-server` is on the PATH. */
export function hasRedisServer(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

/** Skip Redis suites only on a developer machine without redis-server; CI must have it. */
export const skipWithoutRedis = !hasRedisServer() && !process.env.CI;

/** A port for a Redis (or a sentinel) to bind: see free-port.ts. */
export { freePort };

/** True when a Redis (or a sentinel) on `port` answers PING. */
export function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    let answer = "";
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on("error", () => done(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (chunk) => {
      answer += chunk.toString("latin1");
      // A server with requirepass answers -NOAUTH: up all the same.
      if (answer.includes("\r\n")) done(/^(\+PONG|-NOAUTH)/.test(answer));
    });
  });
}

function spawnRedis(port: number): ChildProcess {
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
  return spawn("redis-server", [...args, "--dir", tmpdir(), "--logfile", ""], { stdio: "ignore" });
}

/** Waits up to 5 s for `child` to answer PING on `port`; kills it if it never does. */
export async function waitUntilAnswering(child: ChildProcess, port: number): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server exited early on port ${port}`);
    }
    if (await ping(port)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  child.kill("SIGKILL");
  throw new Error(`redis-server did not answer PING on port ${port}`);
}

/** Sends `signal` and resolves when the process has exited (at once if it already has). */
export async function endProcess(
  child: ChildProcess | undefined,
  signal: NodeJS.Signals,
): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill(signal);
  await exited;
}

/** Starts redis-server on a free 127.0.0.1 port (retrying if another process grabbed the port). */
export async function startRedisServer(): Promise<RedisServer> {
  let child: ChildProcess | undefined;
  let port = 0;
  for (let tries = 0; ; tries++) {
    port = await freePort();
    child = spawnRedis(port);
    try {
      await waitUntilAnswering(child, port);
      break;
    } catch (err) {
      if (tries >= 2) throw err;
    }
  }
  // A worker that dies mid-test must not leave redis-server running.
  const killOnExit = () => child?.kill("SIGKILL");
  process.once("exit", killOnExit);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill: () => endProcess(child, "SIGKILL"),
    async restart() {
      await endProcess(child, "SIGKILL");
      child = spawnRedis(port);
      await waitUntilAnswering(child, port);
    },
    pause: () => child?.kill("SIGSTOP"),
    resume: () => child?.kill("SIGCONT"),
    async stop() {
      process.off("exit", killOnExit);
      child?.kill("SIGCONT");
      await endProcess(child, "SIGKILL");
    },
  };
}

/** One redis-server for the enclosing describe block. Returns a getter for use inside tests. */
export function useRedisServer(): () => RedisServer {
  let server: RedisServer | undefined;
  beforeAll(async () => {
    server = await startRedisServer();
  });
  afterAll(async () => {
    await server?.stop();
    server = undefined;
  });
  return () => {
    if (!server) throw new Error("useRedisServer: the server is only available inside tests");
    return server;
  };
}

/** A RedisCacheConfig for tests: short lock and command timeouts, a unique key prefix. */
export function redisCacheConfig(
  url: string,
  overrides: Partial<RedisCacheConfig> = {},
): RedisCacheConfig {
  return {
    url,
    keyPrefix: `bp-test-${Math.random().toString(36).slice(2)}:`,
    lockTtlMs: 2_000,
    commandTimeoutMs: 200,
    ...overrides,
  };
}

/** A real pino logger whose records are parsed back into `records` for assertions. */
export function recordingLogger(): { logger: Logger; records: Array<Record<string, unknown>> } {
  const records: Array<Record<string, unknown>> = [];
  const destination = { write: (line: string) => records.push(JSON.parse(line)) };
  return { logger: createLogger({ level: "debug", format: "json", destination }), records };
}

/** A plain node-redis client on `server` for the enclosing describe block, to read or plant keys. */
export function useRawRedisClient(
  server: () => RedisServer,
): () => ReturnType<typeof createClient> {
  let client: ReturnType<typeof createClient> | undefined;
  beforeAll(async () => {
    client = createClient({ url: server().url });
    client.on("error", () => {});
    await client.connect();
  });
  afterAll(async () => {
    await client?.close();
    client = undefined;
  });
  return () => {
    if (!client) throw new Error("useRawRedisClient: the client is only available inside tests");
    return client;
  };
}

/** A list a test pushes its shared caches into; each is closed after the test. */
export function useCacheCleanup(): SharedTokenCache[] {
  const caches: SharedTokenCache[] = [];
  afterEach(async () => {
    await Promise.all(caches.splice(0).map((cache) => cache.close()));
  });
  return caches;
}

/** A token as the token endpoint would have issued it now (wall clock), for `fetchFromIdp`. */
export function issueSharedToken(
  accessToken: string,
  options: { lifetimeMs?: number; scope?: string } = {},
): SharedToken {
  const nowMs = Date.now();
  return {
    accessToken,
    tokenType: "Bearer",
    scope: options.scope,
    obtainedAtWallMs: nowMs,
    expiresAtWallMs: nowMs + (options.lifetimeMs ?? 60_000),
  };
}
