/**
 * One world per hostile-peer test file: the real CLI as a child process (so "the process
 * survived" means the same PID is still answering), the emulator as its token endpoint and a
 * fake HTTPS upstream that records every request that reached it. JSON is valid YAML, so the
 * config document is written as JSON.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { startEmulator } from "../../../src/emulator/emulator.js";
import type { Emulator } from "../../../src/emulator/emulator-types.js";
import { type FakeUpstream, startFakeUpstream } from "../../helpers/fake-upstreams.js";
import { type ProxyProcess, startProxyProcess } from "../../helpers/proxy-process.js";
import { createTestPki } from "../../helpers/tls.js";
import { waitFor } from "../../helpers/wait.js";

export interface HostileWorldOptions {
  /** `limits:` of the proxy config. */
  limits?: Record<string, unknown>;
  /** Extra fields of the one upstream `api`. */
  upstream?: Record<string, unknown>;
  /** Replaces the fake upstream's default routes (see fake-upstreams.ts). */
  handler?: (req: IncomingMessage, res: ServerResponse) => void;
  /** Extra environment of the proxy process (e.g. NODE_OPTIONS). */
  env?: NodeJS.ProcessEnv;
  /** Extra top-level keys of the proxy config (`callers`, `tracing`, …). */
  config?: Record<string, unknown>;
  /** The CLI to run instead of dist/cli.js (the bundle, say). */
  cli?: string;
}

export interface HostileWorld {
  proxy: ProxyProcess;
  /** The proxy's PID at start. */
  pid: number;
  /** Port of the proxy listener. */
  port: number;
  upstream: FakeUpstream;
  emulator: Emulator;
  /** True if /livez answered 200 within `timeoutMs`. */
  livez(timeoutMs?: number): Promise<boolean>;
  /** The proxy's resident set size in bytes (from /proc). */
  rssBytes(): number;
  /** Log records the proxy printed so far. */
  logs(): Record<string, unknown>[];
  close(): Promise<void>;
}

export async function startHostileWorld(options: HostileWorldOptions = {}): Promise<HostileWorld> {
  const pki = await createTestPki();
  const dir = mkdtempSync(join(tmpdir(), "bp-hostile-"));
  const caFile = join(dir, "ca.pem");
  writeFileSync(caFile, pki.caPem);
  const emulator = await startEmulator({
    host: "127.0.0.1",
    port: 0,
    tls: { certPem: pki.good.certPem, keyPem: pki.good.keyPem, caPem: pki.caPem },
  });
  const upstream = await startFakeUpstream({
    cert: pki.good,
    ...(options.handler ? { handler: options.handler } : {}),
  });
  const config = {
    listen: { host: "127.0.0.1", port: 0 },
    admin: { host: "127.0.0.1", port: 0 },
    log: { level: "info" },
    shutdown: { drainDelay: "0s", timeout: "1s" },
    limits: options.limits ?? {},
    ...options.config,
    upstreams: [
      {
        name: "api",
        baseUrl: upstream.origin,
        tokenUrl: `${emulator.url}/iam/v1/oauth2/token`,
        clientId: "demo-client",
        clientSecret: "demo-secret",
        tls: { caFile },
        ...options.upstream,
      },
    ],
  };
  let proxy: ProxyProcess;
  try {
    proxy = await startProxyProcess(
      JSON.stringify(config),
      options.env,
      options.cli ? { cli: options.cli } : {},
    );
  } catch (error) {
    await upstream.close();
    await emulator.close();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  const pid = proxy.child.pid!;
  return {
    proxy,
    pid,
    port: Number(new URL(proxy.proxyUrl).port),
    upstream,
    emulator,
    async livez(timeoutMs = 2_000) {
      try {
        const res = await request(`${proxy.adminUrl}/livez`, {
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
        await res.body.dump();
        return res.statusCode === 200;
      } catch {
        return false;
      }
    },
    rssBytes() {
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      const kib = Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1] ?? Number.NaN);
      return kib * 1024;
    },
    logs() {
      return proxy
        .output()
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    },
    async close() {
      await proxy.stop();
      await upstream.close();
      await emulator.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The same process is still running and answering /livez. */
export async function stillAlive(world: HostileWorld): Promise<{ pid: number; live: boolean }> {
  return {
    pid: world.proxy.child.exitCode === null ? world.proxy.child.pid! : -1,
    live: await world.livez(),
  };
}

/**
 * Waits until `count` requests whose path starts with `pathPrefix` reached the upstream after
 * its first `since` requests: a holder is holding its pooled connection only from then on (a
 * fixed wait for it was a guess that a loaded machine could lose).
 */
export function upstreamReached(
  world: HostileWorld,
  { pathPrefix, count, since }: { pathPrefix: string; count: number; since: number },
) {
  const arrived = () =>
    world.upstream.requests.slice(since).filter((r) => r.url.startsWith(pathPrefix)).length;
  return waitFor(() => arrived() >= count, `${count} × ${pathPrefix} at the upstream`, 10_000);
}

/** Waits for the proxy's log line that `match` picks, and returns it. */
export async function logLine(
  world: HostileWorld,
  match: (line: Record<string, unknown>) => boolean,
): Promise<Record<string, unknown>> {
  await waitFor(() => world.logs().some(match), "the proxy's log line", 10_000);
  return world.logs().find(match)!;
}

/** Most RSS growth a hostile test tolerates over the proxy's own start-up level. */
export const RSS_GROWTH_LIMIT_BYTES = 150 * 1024 * 1024;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
