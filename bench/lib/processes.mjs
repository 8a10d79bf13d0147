/**
 * Child processes of the bench: spawn pinned to a core, remember every child so all of them die
 * with the bench (normal exit, error, SIGINT/SIGTERM), and read CPU time and RSS from /proc.
 */
import { execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";

/** @type {Set<import("node:child_process").ChildProcess>} */
const children = new Set();
let cleanupInstalled = false;

/** Clock ticks per second for /proc/<pid>/stat times (CLK_TCK, almost always 100). */
export const CLOCK_TICKS_PER_SECOND = readClockTicks();

function readClockTicks() {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
}

/** True when `taskset` exists and the machine has at least two cores to split. */
export function canPin() {
  try {
    execFileSync("taskset", ["--version"], { stdio: "ignore" });
  } catch {
    return false;
  }
  const online = readFileSync("/sys/devices/system/cpu/online", "utf8").trim();
  return online !== "0";
}

/** Pin an existing process (e.g. the bench itself) to `core`; returns false when it cannot. */
export function pinProcess(pid, core) {
  try {
    execFileSync("taskset", ["-p", "-c", String(core), String(pid)], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/**
 * Spawn `command args` on `core` (through `taskset -c`, which execs, so the pid is the
 * command's own) and register it for cleanup. `core` null means unpinned.
 */
export function spawnPinned(core, command, args, options = {}) {
  installCleanup();
  const [file, argv] =
    core === null ? [command, args] : ["taskset", ["-c", String(core), command, ...args]];
  const child = spawn(file, argv, { stdio: ["ignore", "pipe", "pipe"], ...options });
  children.add(child);
  child.once("exit", () => children.delete(child));
  child.stderrText = "";
  child.stderr?.setEncoding("utf8");
  child.stderr?.on("data", (chunk) => {
    // Keep the tail only: enough to explain a failure, bounded in memory.
    child.stderrText = (child.stderrText + chunk).slice(-8192);
  });
  return child;
}

/** Resolve with the first stdout line matching `pattern`, or reject on exit or after `timeoutMs`. */
export function waitForLine(child, pattern, timeoutMs) {
  return new Promise((resolve, reject) => {
    let buffered = "";
    const timer = setTimeout(
      () => finish(new Error(`no ${pattern} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onData = (chunk) => {
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop() ?? "";
      for (const line of lines) {
        const match = pattern.exec(line);
        if (match) return finish(null, match);
      }
    };
    const onExit = (code, signal) =>
      finish(new Error(`exited (${code ?? signal}) before ready: ${child.stderrText.trim()}`));
    const finish = (error, match) => {
      clearTimeout(timer);
      child.stdout.off("data", onData);
      child.off("exit", onExit);
      if (error) reject(error);
      else resolve(match);
    };
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", onData);
    child.once("exit", onExit);
  });
}

/** Resolve with `{code, signal}` when the child exits; kill it after `timeoutMs`. */
export function waitForExit(child, timeoutMs) {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves when the child is gone. */
export async function stopChild(child, graceMs = 2000) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  // A competitor stopped for another's cell (bench --isolate) must run to act on SIGTERM.
  child.kill("SIGCONT");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await waitForExit(child, graceMs + 1000);
  clearTimeout(timer);
}

/** Stop every registered child (in parallel). */
export async function stopAllChildren() {
  await Promise.all([...children].map((child) => stopChild(child)));
}

function installCleanup() {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  // Last resort on exit: synchronous kill, no waiting.
  process.on("exit", () => {
    for (const child of children) child.kill("SIGKILL");
  });
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.once(signal, () => {
      process.stderr.write(`\nbench: ${signal}, stopping children\n`);
      stopAllChildren().finally(() => process.exit(130));
    });
  }
}

/** Pids of `pid`'s direct children (nginx master → worker). */
export function childPids(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
    return text === "" ? [] : text.split(/\s+/).map(Number);
  } catch {
    return [];
  }
}

/** User + system CPU seconds consumed so far by the processes `pids`. */
export function readCpuSeconds(pids) {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      // Fields after the command name (which may contain spaces) start after the last ')'.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // The process is gone: it contributes nothing more.
    }
  }
  return ticks / CLOCK_TICKS_PER_SECOND;
}

/**
 * Jiffies each core has spent, from /proc/stat: `busy` is everything but idle and iowait. Two
 * readings apart give a core's busy share over the time between them.
 * @returns {Map<number, {busy: number, total: number}>}
 */
export function readCoreTimes() {
  const cores = new Map();
  for (const line of readFileSync("/proc/stat", "utf8").split("\n")) {
    const match = /^cpu(\d+) (.*)$/.exec(line);
    if (!match) continue;
    const fields = match[2].trim().split(/\s+/).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is inside user already)
    const total = fields.slice(0, 8).reduce((sum, value) => sum + value, 0);
    cores.set(Number(match[1]), { busy: total - fields[3] - fields[4], total });
  }
  return cores;
}

/** The busy share of `core` between two readCoreTimes() readings (NaN if it is not listed). */
export function coreBusyShare(before, after, core) {
  const a = before.get(core);
  const b = after.get(core);
  if (!a || !b || b.total === a.total) return Number.NaN;
  return (b.busy - a.busy) / (b.total - a.total);
}

/** The cores this process may run on (its affinity), or undefined where taskset cannot tell. */
export function allowedCores() {
  try {
    const text = execFileSync("taskset", ["-pc", String(process.pid)], { encoding: "utf8" });
    const list = text.slice(text.lastIndexOf(":") + 1).trim();
    const cores = new Set();
    for (const part of list.split(",")) {
      const [from, to = from] = part.split("-").map(Number);
      // A list this does not parse says nothing: no refusal on its account.
      if (!Number.isInteger(from) || !Number.isInteger(to)) return undefined;
      for (let core = from; core <= to; core++) cores.add(core);
    }
    return cores;
  } catch {
    return undefined;
  }
}

/** Current resident set size of `pids` together, in bytes. */
export function readRssBytes(pids) {
  let kib = 0;
  for (const pid of pids) {
    try {
      const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      if (match) kib += Number(match[1]);
    } catch {
      // Gone: nothing resident.
    }
  }
  return kib * 1024;
}

/** Sample the RSS of `getPids()` every `intervalMs`; `stop()` returns the peak in bytes. */
export function sampleRss(getPids, intervalMs = 100) {
  let peak = readRssBytes(getPids());
  const timer = setInterval(() => {
    peak = Math.max(peak, readRssBytes(getPids()));
  }, intervalMs);
  return {
    stop() {
      clearInterval(timer);
      peak = Math.max(peak, readRssBytes(getPids()));
      return peak;
    },
  };
}
