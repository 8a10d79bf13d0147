/**
 * Issue 32: the README reloads with `kill -HUP "$(pidof bearer-proxy)"`, which failed because the
 * process was named `node`. `bearer-proxy run` names itself; `pidof` (procps or sysvinit) matches
 * that name in /proc/PID/stat and /proc/PID/cmdline.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, describe, expect, it } from "vitest";
import { useEmulator } from "../helpers/emulator.js";
import {
  CLI,
  emulatorConfigYaml,
  logRecords,
  pollUntil,
  REPO_ROOT,
  useCliProcesses,
  useTempDir,
  waitUntilReady,
} from "./helpers.js";

const run = promisify(execFile);

/** The README's line, as written. */
const README_RELOAD = 'kill -HUP "$(pidof bearer-proxy)"';

/** A fresh PID namespace where the proxy is the only `bearer-proxy` (unshare from util-linux). */
const canUnshare =
  spawnSync("unshare", ["-Urpf", "--mount-proc", "true"], { stdio: "ignore" }).status === 0;

describe("bearer-proxy run names its process", () => {
  const emulator = useEmulator();
  const cli = useCliProcesses();
  const dir = useTempDir("bp-process-name-");

  it("pidof bearer-proxy finds it, ps shows the name, and a SIGHUP to that pid reloads", async () => {
    const file = join(dir(), "config.yaml");
    writeFileSync(file, emulatorConfigYaml(emulator()));
    const proc = cli.start(["run", "--config", file]);
    const { adminUrl } = await proc.ports();
    await waitUntilReady(adminUrl);
    const pid = proc.child.pid!;

    // Other tests (or proxies) may run beside this one: ours must be among the pids.
    const { stdout } = await run("pidof", ["bearer-proxy"]);
    expect(stdout.trim().split(/\s+/)).toContain(String(pid));
    expect(readFileSync(`/proc/${pid}/comm`, "utf8")).toBe("bearer-proxy\n");
    // argv is rewritten in place: the config path (and any --client-secret) is gone from it.
    expect(readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0+$/, "")).toBe("bearer-proxy");

    await run("sh", ["-c", `kill -HUP ${pid}`]);
    await proc.waitForOutput(/"trigger":"SIGHUP","outcome":"applied"/, 10_000);
    expect(proc.child.exitCode).toBeNull();
  }, 30_000);

  it("other commands keep node's name (a `wait` beside the proxy must not get the signal)", async () => {
    const proc = cli.start(["emulate", "--port", "0"]);
    await proc.waitForOutput(/listening on/);
    expect(readFileSync(`/proc/${proc.child.pid}/comm`, "utf8")).not.toBe("bearer-proxy\n");
  });
});

describe.skipIf(!canUnshare)("the README's reload line, as written", () => {
  const emulator = useEmulator();
  const dir = useTempDir("bp-readme-hup-");
  let child: ChildProcess | undefined;

  afterEach(() => {
    // --kill-child: the namespace (and the proxy in it) ends with unshare.
    child?.kill("SIGKILL");
  });

  it(`${README_RELOAD} reloads the running proxy`, async () => {
    const file = join(dir(), "config.yaml");
    const go = join(dir(), "go");
    writeFileSync(file, emulatorConfigYaml(emulator()));
    // In a PID namespace of its own, pidof sees only this proxy, as on a host that runs one.
    const script = [
      `"${process.execPath}" "${CLI}" run --config "${file}" &`,
      `while [ ! -e "${go}" ]; do sleep 0.05; done`,
      README_RELOAD,
      'echo "reload line exit $?"',
      "wait",
    ].join("\n");
    child = spawn("unshare", ["-Urpf", "--mount-proc", "--kill-child", "sh", "-c", script], {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    await pollUntil(async () => output.includes('"adminPort"'), 20_000, "the proxy started");
    const started = logRecords(output).find((r) => r.adminPort !== undefined);
    await waitUntilReady(`http://127.0.0.1:${started?.adminPort}`);

    writeFileSync(go, "");
    await pollUntil(
      async () => /"trigger":"SIGHUP","outcome":"applied"/.test(output),
      10_000,
      "a reload by SIGHUP",
    );
    expect(output).toContain("reload line exit 0");
  }, 40_000);
});
