/**
 * Issue 33: `run` used to force memory-reducing garbage collections 2 s after its start, while
 * idle. They gave back 5–6 MiB of idle RSS on Node 24, and made every later request cost 9–12 %
 * more CPU for the life of the process (bench/PROFILE.md, "The settle that cost a tenth of the
 * throughput"). This keeps it from coming back: a real `run`, watched from inside through
 * perf_hooks' GC entries (a preload), forces no collection before or after it is ready.
 * Collections V8 decides on its own are fine; only forced ones (`gc()`, a low-memory
 * notification) carry the flag.
 */
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { useEmulator } from "../helpers/emulator.js";
import { emulatorConfigYaml, useCliProcesses, useTempDir, waitUntilReady } from "./helpers.js";

/** Appends one line per forced collection to GC_LOG: its kind and its flags. */
const PRELOAD = `
const { appendFileSync } = require("node:fs");
const { constants, PerformanceObserver } = require("node:perf_hooks");
const log = process.env.GC_LOG;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    const { kind, flags } = entry.detail;
    if (flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) appendFileSync(log, kind + " " + flags + "\\n");
  }
}).observe({ entryTypes: ["gc"] });
`;

const run = promisify(execFile);

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
});
