/**
 * Real Redis Cluster and Sentinel setups on 127.0.0.1 for tests, built from the same
 * `redis-server` binary as redis-server.ts: a three-master cluster (`--cluster-enabled yes` ×3
 * joined by `redis-cli --cluster create`) and a master + replica watched by three sentinels
 * (`redis-server <conf> --sentinel`). Every process gets its own free port and is SIGKILLed when
 * the setup stops or the worker exits.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "redis";
import { endProcess, freePort, waitUntilAnswering } from "./redis-server.js";

const SETTLE_TIMEOUT_MS = 20_000;

/** One redis-server process of a setup. */
export interface RedisNodeProcess {
  readonly port: number;
  /** SIGKILL, like a crashed pod; resolves when the process is gone. */
  kill(): Promise<void>;
}

/** Sends one command to the server on `port` with a short-lived client. */
export async function redisCommand(
  port: number,
  args: string[],
  password?: string,
): Promise<unknown> {
  const client = createClient({
    socket: { host: "127.0.0.1", port, reconnectStrategy: false },
    ...(password !== undefined && { password }),
  });
  client.on("error", () => {});
  await client.connect();
  try {
    return await client.sendCommand(args);
  } finally {
    client.destroy();
  }
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`redis setup: ${what} within ${SETTLE_TIMEOUT_MS} ms`);
}

/** A group of processes started together and stopped together. */
class ProcessGroup {
  readonly dir = mkdtempSync(join(tmpdir(), "bp-redis-"));
  private readonly children = new Set<ChildProcess>();
  private readonly killAll = () => {
    for (const child of this.children) child.kill("SIGKILL");
  };

  constructor() {
    // A worker that dies mid-test must not leave redis-server running.
    process.once("exit", this.killAll);
  }

  /** Starts `redis-server args…` on `fixedPort` or a free port (retrying if another process took it). */
  async start(args: (port: number) => string[], fixedPort?: number): Promise<RedisNodeProcess> {
    for (let tries = 0; ; tries++) {
      const port = fixedPort ?? (await freePort());
      const child = spawn("redis-server", args(port), { stdio: "ignore", cwd: this.dir });
      this.children.add(child);
      try {
        await waitUntilAnswering(child, port);
        return { port, kill: () => endProcess(child, "SIGKILL") };
      } catch (err) {
        this.children.delete(child);
        if (tries >= 2) throw err;
      }
    }
  }

  async stop(): Promise<void> {
    process.off("exit", this.killAll);
    await Promise.all([...this.children].map((child) => endProcess(child, "SIGKILL")));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

const NO_PERSISTENCE = ["--save", "", "--appendonly", "no"];

export interface RedisClusterSetup {
  readonly nodes: readonly RedisNodeProcess[];
  /** `redis://[:password@]127.0.0.1:<port>` of every master, for `clusterNodes`. */
  readonly urls: readonly string[];
  stop(): Promise<void>;
}

/**
 * Three masters sharing the 16384 slots, no replicas; resolves when the cluster state is ok.
 * `firstPort` puts the first node on a port chosen beforehand (a client configured before the
 * cluster exists).
 */
export async function startRedisCluster(
  options: { firstPort?: number; password?: string } = {},
): Promise<RedisClusterSetup> {
  const { firstPort, password } = options;
  const auth = password === undefined ? [] : ["--requirepass", password, "--masterauth", password];
  const group = new ProcessGroup();
  try {
    const nodes: RedisNodeProcess[] = [];
    for (let i = 0; i < 3; i++) {
      // The bus port defaults to port + 10000, which may be taken or beyond 65535: pick one.
      const busPort = await freePort();
      nodes.push(
        await group.start(
          (port) => [
            "--port",
            String(port),
            "--bind",
            "127.0.0.1",
            "--cluster-enabled",
            "yes",
            "--cluster-port",
            String(busPort),
            "--cluster-config-file",
            `nodes-${port}.conf`,
            "--cluster-node-timeout",
            "2000",
            ...NO_PERSISTENCE,
            ...auth,
          ],
          i === 0 ? firstPort : undefined,
        ),
      );
    }
    await createCluster(
      nodes.map((n) => n.port),
      password,
    );
    for (const node of nodes) {
      await until(`cluster_state:ok on ${node.port}`, async () =>
        String(await redisCommand(node.port, ["CLUSTER", "INFO"], password)).includes(
          "cluster_state:ok",
        ),
      );
    }
    const userInfo = password === undefined ? "" : `:${encodeURIComponent(password)}@`;
    return {
      nodes,
      urls: nodes.map((n) => `redis://${userInfo}127.0.0.1:${n.port}`),
      stop: () => group.stop(),
    };
  } catch (err) {
    await group.stop();
    throw err;
  }
}

function createCluster(ports: readonly number[], password: string | undefined): Promise<void> {
  const auth = password === undefined ? [] : ["-a", password, "--no-auth-warning"];
  const args = [...auth, "--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`)];
  const child = spawn("redis-cli", [...args, "--cluster-replicas", "0", "--cluster-yes"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`redis-cli --cluster create failed:\n${output}`)),
    );
  });
}

export const SENTINEL_MASTER_NAME = "bp-master";
/** How long sentinels wait before they call a silent master down: small, so failover is quick. */
export const SENTINEL_DOWN_AFTER_MS = 500;

export interface RedisSentinelSetup {
  /** The master at start; `replica` takes over when it is killed. */
  readonly master: RedisNodeProcess;
  readonly replica: RedisNodeProcess;
  readonly sentinels: readonly RedisNodeProcess[];
  /** `host:port` of every sentinel, for `sentinel.nodes`. */
  readonly sentinelNodes: readonly string[];
  /** The port the sentinels currently name as master. */
  masterPort(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * A master, one replica and three sentinels (quorum 2) that know each other and the replica, so
 * a killed master is failed over within about a second or two.
 */
export async function startRedisSentinel(): Promise<RedisSentinelSetup> {
  const group = new ProcessGroup();
  try {
    const serve = (extra: string[]) => (port: number) => [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      ...NO_PERSISTENCE,
      ...extra,
    ];
    const master = await group.start(serve([]));
    const replica = await group.start(serve(["--replicaof", "127.0.0.1", String(master.port)]));
    await until("the replica in sync", async () =>
      String(await redisCommand(replica.port, ["INFO", "replication"])).includes(
        "master_link_status:up",
      ),
    );
    const sentinels: RedisNodeProcess[] = [];
    for (let i = 0; i < 3; i++) {
      sentinels.push(
        await group.start((port) => {
          // Sentinel rewrites its config file (it records what it learns), so each gets its own.
          const file = join(group.dir, `sentinel-${port}.conf`);
          writeFileSync(
            file,
            [
              `port ${port}`,
              "bind 127.0.0.1",
              `sentinel monitor ${SENTINEL_MASTER_NAME} 127.0.0.1 ${master.port} 2`,
              `sentinel down-after-milliseconds ${SENTINEL_MASTER_NAME} ${SENTINEL_DOWN_AFTER_MS}`,
              `sentinel failover-timeout ${SENTINEL_MASTER_NAME} 5000`,
              `sentinel parallel-syncs ${SENTINEL_MASTER_NAME} 1`,
              "",
            ].join("\n"),
          );
          return [file, "--sentinel"];
        }),
      );
    }
    // A failover needs the sentinels to know the replica and each other (they learn both
    // through the master within a few seconds of starting).
    for (const sentinel of sentinels) {
      await until(
        `sentinel ${sentinel.port} to see the replica and the other sentinels`,
        async () => {
          const info = String(await redisCommand(sentinel.port, ["INFO", "sentinel"]));
          return info.includes("status=ok,address=") && /slaves=1,sentinels=3/.test(info);
        },
      );
    }
    return {
      master,
      replica,
      sentinels,
      sentinelNodes: sentinels.map((s) => `127.0.0.1:${s.port}`),
      async masterPort() {
        for (const sentinel of sentinels) {
          const reply = await redisCommand(sentinel.port, [
            "SENTINEL",
            "GET-MASTER-ADDR-BY-NAME",
            SENTINEL_MASTER_NAME,
          ]).catch(() => undefined);
          if (Array.isArray(reply)) return Number(reply[1]);
        }
        throw new Error("no sentinel answered");
      },
      stop: () => group.stop(),
    };
  } catch (err) {
    await group.stop();
    throw err;
  }
}
