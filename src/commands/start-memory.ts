/**
 * Memory a `run` process holds after its start for nothing (issue 33: an idle sidecar near the
 * runtime's floor), measured with bench/footprint.mjs.
 *
 * Node 20's V8 tiers undici's HTTP parser (llhttp, WebAssembly) up to TurboFan after one or two
 * responses, so during start, on the token response. That one compile mallocs ~30 MB on a V8
 * worker thread, and glibc keeps ~10 MiB of it resident for the life of the process. Node 24
 * waits for a budget 7× larger; giving Node 20 the same budget moves the compile to the first
 * real traffic, where it is worth its cost, and an idle sidecar never pays it.
 *
 * What this module no longer does: collect garbage once started. A forced full collection in
 * the settled process (V8's `gc`, last-resort or plain) gave back the start's young generation
 * and bytecode — 5–6 MiB of idle RSS on Node 24 — but every request after it cost 9–12 % more CPU
 * on Node 24 (2 % on Node 20), for the life of the process: 25 s of load later it had not
 * recovered (bench/PROFILE.md, "The settle that cost a tenth of the throughput").
 * test/cli/no-forced-collection.test.ts keeps `run` from forcing one again.
 */
import { setFlagsFromString } from "node:v8";

/** Node 24's V8 default (`--wasm-tiering-budget`); Node 20's is 1.8 M. */
const WASM_TIERING_BUDGET = 13_000_000;

/**
 * Before the first WebAssembly module is compiled (undici compiles llhttp on its first
 * connection): the budget holds for modules compiled after it is set.
 */
export function delayWasmTierUp(): void {
  setFlagsFromString(`--wasm-tiering-budget=${WASM_TIERING_BUDGET}`);
}
