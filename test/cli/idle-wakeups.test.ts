/**
 * Issue 33 (pay for what you use): an idle `run` wakes its main thread about 11 times a second,
 * not 100. prom-client's event-loop delay monitor, at its default 10 ms, was a timer that woke an
 * idle sidecar 100 times a second (src/observability/event-loop-delay.ts).
 * Counted the way the kernel counts them: the main thread's voluntary context switches, each one
 * a return to epoll_wait with nothing to do. A loaded machine can only delay a timer, so it can
 * only lower the count.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { useEmulator } from "../helpers/emulator.js";
import { sleep } from "../helpers/wait.js";
import { emulatorConfigYaml, useCliProcesses, useTempDir, waitUntilReady } from "./helpers.js";

/** 100 ms monitor: ~11 a second on Node 20 and 24. 10 ms: ~100. */
const MAX_IDLE_WAKEUPS_PER_SECOND = 40;

/** How long the count runs, after a moment for the start's last work to finish. */
const SETTLE_MS = 1_000;
const COUNT_MS = 2_000;

const onLinux = existsSync("/proc/self/task");

/** The main thread's voluntary context switches so far. */
function mainThreadSwitches(pid: number): number {
  const status = readFileSync(`/proc/${pid}/task/${pid}/status`, "utf8");
  const match = /^voluntary_ctxt_switches:\s+(\d+)$/m.exec(status);
  if (!match) throw new Error(`no voluntary_ctxt_switches in /proc/${pid}/task/${pid}/status`);
  return Number(match[1]);
}

/** Main-thread wakeups a second, counted over COUNT_MS. */
async function wakeupsPerSecond(pid: number): Promise<number> {
  const before = mainThreadSwitches(pid);
  const startedAt = performance.now();
  await sleep(COUNT_MS);
  const after = mainThreadSwitches(pid);
  return ((after - before) * 1000) / (performance.now() - startedAt);
}

describe.runIf(onLinux)("an idle bearer-proxy run", () => {
  const emulator = useEmulator();
  const cli = useCliProcesses();
  const dir = useTempDir("bp-idle-wakeups-");
  let control: ChildProcess | undefined;

  afterEach(() => {
    control?.kill("SIGKILL");
    control = undefined;
  });

  it(`wakes its main thread fewer than ${MAX_IDLE_WAKEUPS_PER_SECOND} times a second`, async () => {
    const file = join(dir(), "config.yaml");
    writeFileSync(file, emulatorConfigYaml(emulator()));
    const proc = cli.start(["run", "--config", file]);
    const { adminUrl } = await proc.ports();
    await waitUntilReady(adminUrl);
    await sleep(SETTLE_MS);
    const pid = proc.child.pid ?? 0;
    const rate = await wakeupsPerSecond(pid);
    expect(proc.child.exitCode).toBeNull();
    expect(rate).toBeLessThan(MAX_IDLE_WAKEUPS_PER_SECOND);
  }, 30_000);

  it("the count sees a 10 ms timer (the control)", async () => {
    control = spawn(process.execPath, ["-e", "setInterval(() => {}, 10)"], { stdio: "ignore" });
    await sleep(SETTLE_MS);
    const rate = await wakeupsPerSecond(control.pid ?? 0);
    expect(rate).toBeGreaterThan(MAX_IDLE_WAKEUPS_PER_SECOND);
  }, 30_000);
});
