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
 *   runs no collection that would shrink it again. One memory-reducing full collection once
 *   started, when no request is in flight, gives those pages back.
 */
import { setFlagsFromString } from "node:v8";
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
 * Once the lifecycle has started, after SETTLE_DELAY_MS, one memory-reducing full collection,
 * unless a request is in flight then (a busy process uses its young generation anyway). It
 * pauses the event loop once: 50–60 ms on Node 24, 2–3 ms on Node 20 (logged at debug with what
 * it freed).
 */
export function settleAfterStart(
  lifecycle: Lifecycle,
  logger: Logger,
  delayMs = SETTLE_DELAY_MS,
): void {
  lifecycle.onStarted(() => {
    setTimeout(() => {
      if (lifecycle.phase !== "running" || lifecycle.load.inFlight > 0) return;
      const rssBefore = process.memoryUsage.rss();
      const startedAt = performance.now();
      collectGarbageFunction()({ type: "major", execution: "sync", flavor: "last-resort" });
      const pauseMs = performance.now() - startedAt;
      const rssAfter = process.memoryUsage.rss();
      logger.debug(
        {
          pauseMs: Math.round(pauseMs * 10) / 10,
          rssBeforeMiB: Math.round(rssBefore / 104_857.6) / 10,
          rssAfterMiB: Math.round(rssAfter / 104_857.6) / 10,
        },
        "start settled: one full garbage collection",
      );
    }, delayMs).unref();
  });
}
