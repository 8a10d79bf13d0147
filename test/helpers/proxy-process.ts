/**
 * Runs the built CLI (`node dist/cli.js run`, or another build of it such as the bundle) as a real
 * child process with a YAML config, the way an operator would, and learns its ports from its
 * startup log line. `npm test` builds dist first.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const CLI = resolve(import.meta.dirname, "../../dist/cli.js");

export interface ProxyProcess {
  child: ChildProcess;
  proxyUrl: string;
  adminUrl: string;
  /** Everything the process printed so far (JSON log lines). */
  output(): string;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Starts `count` processes with the same config; if any fails to start, the others are stopped
 * before the error is thrown (a bare `Promise.all` would leave them running).
 */
export async function startProxyProcesses(
  count: number,
  configYaml: string,
  env: NodeJS.ProcessEnv = {},
): Promise<ProxyProcess[]> {
  const results = await Promise.allSettled(
    Array.from({ length: count }, () => startProxyProcess(configYaml, env)),
  );
  const failed = results.find((r) => r.status === "rejected");
  const started = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  if (failed) {
    await Promise.all(started.map((p) => p.stop()));
    throw failed.reason;
  }
  return started;
}

export async function startProxyProcess(
  configYaml: string,
  env: NodeJS.ProcessEnv = {},
  { cli = CLI }: { cli?: string } = {},
): Promise<ProxyProcess> {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run npm run build first`);
  const dir = mkdtempSync(join(tmpdir(), "bp-proc-"));
  const configFile = join(dir, "config.yaml");
  writeFileSync(configFile, configYaml);
  const child = spawn(process.execPath, [cli, "run", "--config", configFile], {
    env: { PATH: process.env.PATH, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  const portsPromise = new Promise<{ proxy: number; admin: number }>((resolvePorts, reject) => {
    const timer = setTimeout(() => reject(new Error(`proxy did not start:\n${output}`)), 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      for (const line of output.split("\n")) {
        if (!line.includes('"proxyPorts"')) continue;
        const record = JSON.parse(line) as { proxyPorts: number[]; adminPort: number };
        clearTimeout(timer);
        resolvePorts({ proxy: record.proxyPorts[0] ?? 0, admin: record.adminPort });
        return;
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    void exited.then((code) => reject(new Error(`proxy exited with ${code}:\n${output}`)));
  });
  let ports: { proxy: number; admin: number };
  try {
    ports = await portsPromise;
  } catch (error) {
    // A start that failed or timed out must not leave its process (or its folder) behind.
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    child,
    proxyUrl: `http://127.0.0.1:${ports.proxy}`,
    adminUrl: `http://127.0.0.1:${ports.admin}`,
    output: () => output,
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      const code = await exited;
      rmSync(dir, { recursive: true, force: true });
      return code;
    },
  };
}
