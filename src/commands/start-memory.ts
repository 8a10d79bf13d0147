/**
 * Memory a `run` process holds after its start for nothing (issue 33: an idle sidecar near the
 * runtime's floor). Two things, both measured with bench/footprint.mjs:
 *
 * - Node 20's V8 tiers undici's HTTP parser (llhttp, WebAssembly) up to TurboFan after one or two
 *   responses, so during start, on the token response. That one compile mallocs ~30 MB on a
 *   V8 worker thread, and glibc keeps ~10 MiB of it resident for the life of the process. Node 24
 *   waits for a budget 7× larger; giving Node 20 the same budget moves the compile to the first
 *   real traffic, where it is worth its cost, and an idle sidecar never pays it.
 * - The start's garbage grows V8's young generation (to 8 MiB on Node 24), and an idle process
 *   runs no collection that would shrink it again. A memory-reducing full collection once
 *   started, when no request is in flight, gives those pages back.
 * - The start's code (the config's loading and checks, the token fetch, the listeners' set-up)
 *   keeps its bytecode until it has been unused for six full collections (V8's
 *   `--bytecode-old-age`), which an idle process never runs: ~1 MiB of bytecode and metadata
 *   on Node 24. A few more memory-reducing collections, a moment apart, age it out; code used
 *   again later is compiled again from its source, as V8 does anyway once traffic runs
 *   collections.
 */
import { getHeapCodeStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { Lifecycle } from "../lifecycle.js";
import type { Logger } from "../observability/logger.js";

/** Node 24's V8 default (`--wasm-tiering-budget`); Node 20's is 1.8 M. */
const WASM_TIERING_BUDGET = 13_000_000;

/** How long after /startup passes the collection waits: past the readiness probes' first rounds. */
const SETTLE_DELAY_MS = 2_000;

/**
 * Before the first WebAssembly module is compiled (undici compiles llhttp on its first
 * connection): the budget holds for modules compiled after it is set.
 */
export function delayWasmTierUp(): void {
  setFlagsFromString(`--wasm-tiering-budget=${WASM_TIERING_BUDGET}`);
}

type CollectGarbage = (options: {
  type: "major";
  execution: "sync";
  /** V8 ≥ 12 (Node 22+): also shrinks the young generation; older V8 ignores it. */
  flavor: "last-resort";
}) => void;

/**
 * V8's `gc` function without running the whole process with --expose-gc (which would also hand
 * it to every context): the flag is read when a context is created, so it is on for one new
 * context and off again. Jest's leak detector gets it the same way.
 */
function collectGarbageFunction(): CollectGarbage {
  setFlagsFromString("--expose-gc");
  try {
    return runInNewContext("gc") as CollectGarbage;
  } finally {
    setFlagsFromString("--no-expose-gc");
  }
}

/**
 * Memory-reducing collections in all: each runs two full collections inside V8, so the third
 * brings the start's bytecode to the flushing age and the fourth returns the freed pages
 * (measured on Node 24: ~1 MiB flushed by the third, none by the first two). Node 20's V8 reads
 * the options as a young-generation collection and flushes nothing.
 */
const COLLECTIONS = 4;

/** Between two of them: other work (a probe, a first request) gets the loop in between. */
const COLLECTION_GAP_MS = 200;

/**
 * Once the lifecycle has started, after `delayMs`, COLLECTIONS memory-reducing full collections
 * `gapMs` apart, each only while no request is in flight: a busy process uses its young
 * generation anyway, and its own collections age the bytecode, so a request in flight at a
 * collection's moment stops the rest. Each pauses the event loop once: 40–60 ms for the first
 * on Node 24, 10–20 ms for the others, 2–3 ms on Node 20. Logged at debug with what they freed.
 */
export function settleAfterStart(
  lifecycle: Lifecycle,
  logger: Logger,
  delayMs = SETTLE_DELAY_MS,
  gapMs = COLLECTION_GAP_MS,
): void {
  lifecycle.onStarted(() => {
    let rssBefore = 0;
    let codeBefore = 0;
    let collections = 0;
    let pauseMs = 0;
    let longestPauseMs = 0;
    const collectOnce = () => {
      const busy = lifecycle.phase !== "running" || lifecycle.load.inFlight > 0;
      if (!busy) {
        if (collections === 0) {
          rssBefore = process.memoryUsage.rss();
          codeBefore = bytecodeBytes();
        }
        const startedAt = performance.now();
        collectGarbageFunction()({ type: "major", execution: "sync", flavor: "last-resort" });
        const tookMs = performance.now() - startedAt;
        pauseMs += tookMs;
        longestPauseMs = Math.max(longestPauseMs, tookMs);
        collections++;
      }
      if (!busy && collections < COLLECTIONS) {
        setTimeout(collectOnce, gapMs).unref();
        return;
      }
      if (collections === 0) return;
      logger.debug(
        {
          collections,
          pauseMs: roundTenth(pauseMs),
          longestPauseMs: roundTenth(longestPauseMs),
          rssBeforeMiB: roundTenth(rssBefore / MIB),
          rssAfterMiB: roundTenth(process.memoryUsage.rss() / MIB),
          bytecodeFreedMiB: roundTenth((codeBefore - bytecodeBytes()) / MIB),
        },
        "start settled: memory-reducing collections",
      );
    };
    setTimeout(collectOnce, delayMs).unref();
  });
}

const MIB = 1024 * 1024;

const roundTenth = (value: number) => Math.round(value * 10) / 10;

/** V8's bytecode and its metadata, what flushing frees. */
const bytecodeBytes = () => getHeapCodeStatistics().bytecode_and_metadata_size;
