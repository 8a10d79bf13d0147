/**
 * Drive the built CLI (`node dist/cli.js ...`) as real child processes, the way an operator or an
 * init script would: a clean environment (PATH only, plus what the test passes), separate stdout
 * and stderr, exit code and signal. `npm test` builds dist before vitest runs.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, afterEach, beforeAll } from "vitest";

/** The built CLI entry point. */
export const CLI = resolve(import.meta.dirname, "../../dist/cli.js");

/** The repository root (config/ lives there). */
export const REPO_ROOT = resolve(import.meta.dirname, "../..");

/** Every command the CLI knows, in help order. */
export const COMMAND_NAMES = [
  "run",
  "demo",
  "emulate",
  "validate",
  "wait",
  "token",
  "check",
  "intercept-ca",
];

export interface CliOptions {
  /** Added to an environment that otherwise holds only PATH. */
  env?: Record<string, string>;
  cwd?: string;
  /** SIGKILL the child after this long (default 20 s) and fail. */
  timeoutMs?: number;
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** A long-running CLI child (run, demo, emulate, wait). */
export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** stdout and stderr, in arrival order. */
  output(): string;
  /** Resolves once the child has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>;
  /** Wait until the output matches; rejects with the output so far on timeout or early exit. */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** The ports from the startup log line `{"proxyPorts":[…],"adminPort":N,…}`. */
  ports(timeoutMs?: number): Promise<{ proxyUrl: string; adminUrl: string }>;
}

/** Spawns CLI children for a test file and SIGKILLs every one still alive after each test. */
export interface CliProcesses {
  run(args: string[], options?: CliOptions): Promise<CliResult>;
  start(args: string[], options?: CliOptions): CliProcess;
}

export function assertBuilt(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`);
}

/**
 * Register cleanup and return spawners. Call at describe level. Cleanup runs after each test, or
 * after all of them for `describe.concurrent` blocks (where one test's afterEach would otherwise
 * kill a sibling's children).
 */
export function useCliProcesses(
  options: { cleanup?: "afterEach" | "afterAll" } = {},
): CliProcesses {
  const alive = new Set<CliProcess>();
  beforeAll(assertBuilt);
  (options.cleanup === "afterAll" ? afterAll : afterEach)(async () => {
    const pending = [...alive];
    alive.clear();
    for (const proc of pending) {
      if (proc.child.exitCode === null && proc.child.signalCode === null) {
        proc.child.kill("SIGKILL");
      }
    }
    await Promise.all(pending.map((proc) => proc.exited));
  });

  const start = (args: string[], options: CliOptions = {}): CliProcess => {
    const proc = spawnCli(args, options);
    alive.add(proc);
    void proc.exited.then(() => alive.delete(proc));
    return proc;
  };
  return {
    start,
    async run(args, options = {}) {
      const proc = start(args, options);
      const timeoutMs = options.timeoutMs ?? 20_000;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          proc.child.kill("SIGKILL");
          reject(
            new Error(`bearer-proxy ${args.join(" ")} ran over ${timeoutMs} ms:\n${proc.output()}`),
          );
        }, timeoutMs);
      });
      try {
        const { code, signal } = await Promise.race([proc.exited, timedOut]);
        return { code, signal, stdout: proc.stdout(), stderr: proc.stderr() };
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

function spawnCli(args: string[], options: CliOptions): CliProcess {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...options.env },
    cwd: options.cwd ?? REPO_ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  let output = "";
  const listeners = new Set<() => void>();
  const notify = () => {
    for (const listener of listeners) listener();
  };
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
    output += chunk.toString();
    notify();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
    output += chunk.toString();
    notify();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>(
    (resolveExit) => {
      // "close" (not "exit"): every byte of stdout/stderr has been read by then.
      child.once("close", (code, signal) => {
        resolveExit({ code, signal, atMs: performance.now() });
        notify();
      });
    },
  );
  let done = false;
  void exited.then(() => {
    done = true;
  });

  const waitForOutput = (pattern: RegExp, timeoutMs = 25_000): Promise<RegExpMatchArray> =>
    new Promise((resolveMatch, reject) => {
      const check = () => {
        const match = output.match(pattern);
        if (match) {
          finish();
          resolveMatch(match);
        } else if (done) {
          finish();
          reject(new Error(`exited before printing ${pattern}:\n${output}`));
        }
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`no ${pattern} within ${timeoutMs} ms:\n${output}`));
      }, timeoutMs);
      const finish = () => {
        clearTimeout(timer);
        listeners.delete(check);
      };
      listeners.add(check);
      check();
    });

  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    output: () => output,
    exited,
    waitForOutput,
    async ports(timeoutMs = 25_000) {
      const [line] = await waitForOutput(/^\{.*"proxyPorts".*\}$/m, timeoutMs);
      const record = JSON.parse(line) as { proxyPorts: number[]; adminPort: number };
      return {
        proxyUrl: `http://127.0.0.1:${record.proxyPorts[0]}`,
        adminUrl: `http://127.0.0.1:${record.adminPort}`,
      };
    },
  };
}

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request on a fresh connection (no pooling: a closed listener shows as ECONNREFUSED). */
export function httpCall(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<HttpResult> {
  return new Promise((resolveCall, reject) => {
    const req = httpRequest(
      url,
      { method: options.method ?? "GET", headers: options.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("error", reject);
        res.on("end", () =>
          resolveCall({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        );
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error(`${url}: no answer within 10 s`)));
    req.on("error", reject);
    req.end(options.body);
  });
}

/** Poll until `probe` returns true; rejects after `timeoutMs`. */
export async function pollUntil(
  probe: () => Promise<boolean>,
  timeoutMs: number,
  what: string,
  intervalMs = 25,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (performance.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(intervalMs);
  }
}

/** Wait until GET {adminUrl}/readyz answers 200. */
export function waitUntilReady(adminUrl: string, timeoutMs = 15_000): Promise<void> {
  return pollUntil(
    async () => (await httpCall(`${adminUrl}/readyz`)).status === 200,
    timeoutMs,
    `${adminUrl}/readyz 200`,
  );
}

/** A TCP listener on 127.0.0.1 that holds a port (for "address in use"); closed after the file. */
export function useBusyPort(): () => number {
  let server: Server | undefined;
  beforeAll(async () => {
    server = createServer((socket) => socket.destroy());
    await new Promise<void>((r) => server?.listen(0, "127.0.0.1", r));
  });
  afterAll(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  });
  return () => {
    const address = server?.address();
    if (!address || typeof address === "string") throw new Error("busy port not listening");
    return address.port;
  };
}

/** A port for a child to bind later: see test/helpers/free-port.ts. */
export { freePort } from "../helpers/free-port.js";

/** A temporary folder for the describe block, removed afterwards. */
export function useTempDir(prefix = "bp-cli-"): () => string {
  let dir: string | undefined;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), prefix));
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    if (!dir) throw new Error("useTempDir: only inside tests");
    return dir;
  };
}

/** The JSON log lines among a process's output (other text skipped). */
export function logRecords(output: string): Record<string, unknown>[] {
  const records: Record<string, unknown>[] = [];
  for (const line of output.split("\n")) {
    if (!line.startsWith("{")) continue;
    try {
      records.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a line cut mid-write; ignore
    }
  }
  return records;
}

/** A JWT: three base64url parts separated by dots. */
export const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** A config file for one upstream at a running emulator (demo client), ports 0, on 127.0.0.1. */
export function emulatorConfigYaml(
  emulator: { url: string; caFile: string },
  options: { drainDelay?: string; timeout?: string } = {},
): string {
  return `listen: { host: 127.0.0.1, port: 0 }
admin: { host: 127.0.0.1, port: 0 }
shutdown: { drainDelay: ${options.drainDelay ?? "1s"}, timeout: ${options.timeout ?? "3s"} }
upstreams:
  - name: emu
    baseUrl: ${emulator.url}
    clientId: demo-client
    clientSecret: demo-secret
    tls: { caFile: ${JSON.stringify(emulator.caFile)} }
`;
}
