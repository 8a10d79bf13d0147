/**
 * Issue 33: `run` used to force memory-reducing garbage collections 2 s after its start, while
 * idle. They gave back 5–6 MiB of idle RSS on Node 24, and made every later request cost 9–12 %
 * more CPU for the life of the process (bench/PROFILE.md, "The settle that cost a tenth of the
 * throughput"). This keeps it from coming back: a real `run`, watched from inside through
 * perf_hooks' GC entries and V8's own GC trace (a preload), forces no collection before or after
 * it is ready. Collections V8 decides on its own are fine. A forced one shows either way: a plain
 * `gc()` carries perf_hooks' forced flag; the last-resort kind the settle used does not on
 * Node 24 (flags 0), but V8's trace names its reason, `testing`, on every Node.
 */
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { useEmulator } from "../helpers/emulator.js";
import { emulatorConfigYaml, useCliProcesses, useTempDir, waitUntilReady } from "./helpers.js";

/**
 * Appends one line per forced collection to GC_LOG (its kind and its flags), and turns on V8's
 * GC trace (one line per collection on stdout, ending with its reason).
 */
const PRELOAD = `
const { appendFileSync } = require("node:fs");
const { constants, PerformanceObserver } = require("node:perf_hooks");
require("node:v8").setFlagsFromString("--trace-gc");
const log = process.env.GC_LOG;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const { kind, flags } = entry.detail;
    if (flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) appendFileSync(log, kind + " " + flags + "\\n");
  }
}).observe({ entryTypes: ["gc"] });
`;

const run = promisify(execFile);

/**
 * A line of V8's GC trace for a collection the process asked for: `gc()` in any flavor
 * (`testing`) or a low-memory notification.
 */
const FORCED_IN_TRACE =
  /^\[\d+:0x[0-9a-f]+\]\s+\d+ ms: .*\b(testing|low memory notification)\b.*$/gm;

/** The collections V8's trace shows at all: without them the check above proves nothing. */
const ANY_IN_TRACE = /^\[\d+:0x[0-9a-f]+\]\s+\d+ ms: (Scavenge|Mark-Compact|Mark-Sweep|Minor)/m;

/** Past the old settle's moment: 2 s after the start, then 4 collections 200 ms apart. */
const IDLE_AFTER_READY_MS = 3_500;

describe("bearer-proxy run", () => {
  const emulator = useEmulator();
  const cli = useCliProcesses();
  const dir = useTempDir("bp-no-forced-gc-");

  /** The preload and its log for one process: `--require` the preload with GC_LOG set. */
  function forcedCollectionWatch(name: string) {
    const preload = join(dir(), `${name}-watch-gc.cjs`);
    const log = join(dir(), `${name}-forced-gc.log`);
    writeFileSync(preload, PRELOAD);
    writeFileSync(log, "");
    return { preload, log, forced: () => readFileSync(log, "utf8") };
  }

  it("forces no garbage collection, before it is ready or idle after", async () => {
    const watch = forcedCollectionWatch("run");
    const file = join(dir(), "config.yaml");
    writeFileSync(file, emulatorConfigYaml(emulator()));
    const proc = cli.start(["run", "--config", file], {
      env: { NODE_OPTIONS: `--require ${watch.preload}`, GC_LOG: watch.log },
    });
    const { adminUrl } = await proc.ports();
    await waitUntilReady(adminUrl);
    await new Promise((done) => setTimeout(done, IDLE_AFTER_READY_MS));
    expect(proc.child.exitCode).toBeNull();
    expect(watch.forced()).toBe("");
    expect(proc.stdout()).toMatch(ANY_IN_TRACE);
    expect(proc.stdout().match(FORCED_IN_TRACE) ?? []).toEqual([]);
  }, 30_000);

  it("the watch sees a forced collection (the control)", async () => {
    const watch = forcedCollectionWatch("control");
    await run(
      process.execPath,
      ["--expose-gc", "--require", watch.preload, "-e", "gc(); setTimeout(() => {}, 100);"],
      { env: { ...process.env, GC_LOG: watch.log } },
    );
    expect(watch.forced()).toMatch(/^\d+ \d+\n/);
  }, 30_000);

  it("the trace sees the settle's last-resort collection, which perf_hooks' flag misses on Node 24 (the control)", async () => {
    const watch = forcedCollectionWatch("last-resort");
    const script = `gc({ type: "major", execution: "sync", flavor: "last-resort" });`;
    const { stdout } = await run(
      process.execPath,
      ["--expose-gc", "--require", watch.preload, "-e", `${script} setTimeout(() => {}, 100);`],
      { env: { ...process.env, GC_LOG: watch.log } },
    );
    expect(stdout.match(FORCED_IN_TRACE)?.length ?? 0).toBeGreaterThanOrEqual(1);
  }, 30_000);
});
