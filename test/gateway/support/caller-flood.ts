/**
 * Issue 30's password floods, from outside: the real CLI as a child process (its event loop is
 * not the test's, so a bcrypt stall shows in the latency the probe measures and not in the test's
 * own timers), the TLS emulator as token endpoint and upstream, users with bcrypt cost 10 (the
 * cost `htpasswd -B -C 10` writes, ~70–90 ms a check here), and a probe: an already-verified
 * caller on its own keep-alive connection, one request at a time, whose latency is the figure the
 * issue quotes (p50/p99).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import bcrypt from "bcryptjs";
import type { Emulator } from "../../../src/emulator/emulator-types.js";
import { adminText, emulatorUpstream, errorCode, httpGet } from "../../helpers/callers-fixture.js";
import { startTlsEmulator } from "../../helpers/emulator.js";
import { type ProxyProcess, startProxyProcess } from "../../helpers/proxy-process.js";
import { createTestPki } from "../../helpers/tls.js";
import { sleep } from "../../helpers/wait.js";

/** The bcrypt cost of the flood tests' users: a realistic one, so a check costs what it would. */
export const FLOOD_BCRYPT_COST = 10;

export interface FloodGateway {
  proxy: ProxyProcess;
  emulator: Emulator;
  close(): Promise<void>;
}

/**
 * The gateway as a process: upstreams named by `allow` (name → users), callers from `users`
 * (name → password, hashed at {@link FLOOD_BCRYPT_COST}). Only keys main had before issue 30
 * are used, so the same file measures the code before the fix.
 */
export async function startFloodGateway(options: {
  users: Record<string, string>;
  upstreams: Record<string, string[]>;
}): Promise<FloodGateway> {
  const pki = await createTestPki();
  const emulator = await startTlsEmulator(pki);
  const dir = mkdtempSync(join(tmpdir(), "bp-flood-"));
  const caFile = join(dir, "ca.pem");
  writeFileSync(caFile, pki.caPem);
  const usersFile = join(dir, "callers.htpasswd");
  writeFileSync(
    usersFile,
    Object.entries(options.users)
      .map(([user, password]) => `${user}:${bcrypt.hashSync(password, FLOOD_BCRYPT_COST)}\n`)
      .join(""),
  );
  const config = {
    listen: { host: "127.0.0.1", port: 0 },
    admin: { host: "127.0.0.1", port: 0 },
    shutdown: { drainDelay: "0s", timeout: "1s" },
    callers: { basic: { usersFile } },
    upstreams: Object.entries(options.upstreams).map(([name, users]) =>
      emulatorUpstream(emulator.url, name, {
        allow: users.map((user) => ({ user })),
        tls: { caFile },
      }),
    ),
  };
  let proxy: ProxyProcess;
  try {
    proxy = await startProxyProcess(JSON.stringify(config));
  } catch (error) {
    await emulator.close();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    proxy,
    emulator,
    async close() {
      await proxy.stop();
      await emulator.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Latencies (ms) of one caller sending request after request on one keep-alive connection. */
export interface LatencyProbe {
  /** Stop after the request in flight; resolves with every latency, in order. */
  stop(): Promise<number[]>;
  /** Statuses other than 200 seen so far (0: the connection failed). */
  failures: number[];
}

/** One GET after another (with `pauseMs` between) until stopped. */
export function startLatencyProbe(url: string, header: string, pauseMs = 10): LatencyProbe {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  const failures: number[] = [];
  let stopping = false;
  const one = () =>
    new Promise<void>((resolve) => {
      const started = performance.now();
      const req = httpRequest(url, { agent, headers: { "proxy-authorization": header } }, (res) => {
        res.resume();
        res.on("end", () => {
          latencies.push(performance.now() - started);
          if (res.statusCode !== 200) failures.push(res.statusCode ?? 0);
          resolve();
        });
      });
      // A reset is a failure to report, not a reason to stop measuring.
      req.on("error", () => {
        latencies.push(performance.now() - started);
        failures.push(0);
        resolve();
      });
      req.end();
    });
  const loop = (async () => {
    while (!stopping) {
      await one();
      await sleep(pauseMs);
    }
  })();
  return {
    failures,
    async stop() {
      stopping = true;
      await loop;
      agent.destroy();
      return latencies;
    },
  };
}

export interface LatencySummary {
  count: number;
  p50: number;
  p99: number;
  max: number;
}

export function summarize(latencies: readonly number[]): LatencySummary {
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  const round = (ms: number) => Math.round(ms * 10) / 10;
  return {
    count: sorted.length,
    p50: round(at(0.5)),
    p99: round(at(0.99)),
    max: round(sorted.at(-1) ?? 0),
  };
}

/** `bearer_proxy_caller_password_checks_total`, or undefined where the metric does not exist. */
export async function passwordChecksStarted(adminUrl: string): Promise<number | undefined> {
  const text = await adminText(adminUrl, "/metrics");
  const match = /^bearer_proxy_caller_password_checks_total (\d+)/m.exec(text);
  return match ? Number(match[1]) : undefined;
}

/** One answer of a flood: its status, error code and when it arrived (ms after the flood began). */
export interface FloodAnswer {
  status: number;
  code: string | undefined;
  retryAfter: string | undefined;
  atMs: number;
}

/** GET `url` on a fresh connection from `localAddress`, timed from `startedMs`; status 0: reset. */
export async function floodRequest(
  url: string,
  localAddress: string,
  header: string,
  startedMs: number,
): Promise<FloodAnswer> {
  let answer: Awaited<ReturnType<typeof httpGet>>;
  try {
    answer = await httpGet(url, { localAddress, headers: { "proxy-authorization": header } });
  } catch {
    return { status: 0, code: "reset", retryAfter: undefined, atMs: performance.now() - startedMs };
  }
  const retryAfter = answer.headers["retry-after"];
  return {
    status: answer.status,
    code: errorCode(answer.text),
    retryAfter: typeof retryAfter === "string" ? retryAfter : undefined,
    atMs: performance.now() - startedMs,
  };
}
