/**
 * V8 settings a bearer-proxy process makes for itself (issue 33), measured with the bench. They
 * are the process's, not the app's: the CLI sets them (`run`, and the bundle's entry for every
 * command, before any other chunk compiles: a code cache is valid only under the flags it was
 * made with); `buildApp`/`startProxy` embedded in another program leave the runtime alone. A
 * flag given on Node's command line wins (Node refuses both in NODE_OPTIONS), so an operator can
 * put V8's default back: `node --max-inlined-bytecode-size-cumulative=920 cli.cjs run`.
 *
 * - **undici's parser tiers up on traffic, not on the token.** Node 20's V8 tiers undici's HTTP
 *   parser (llhttp, WebAssembly) up to TurboFan after one or two responses, so during start, on
 *   the token response. That one compile mallocs ~30 MB on a V8 worker thread, and glibc keeps
 *   ~10 MiB of it resident for the life of the process. Node 24 waits for a budget 7× larger;
 *   giving Node 20 the same budget moves the compile to the first real traffic, where it is
 *   worth its cost, and an idle sidecar never pays it.
 * - **A request's path fits in one optimized function.** TurboFan stops inlining into a function
 *   once the callees it took hold 920 bytes of bytecode in all. A plain request's walk (the door's
 *   checks, routing, the pacing turn, the exchange, the relay, the metrics) is many small
 *   functions, and the default left some of them out, each then a real call. Three times the
 *   budget made a small GET ~7 % faster on Node 24 and twice ~6 % on both Nodes; more gained
 *   nothing (bench/PROFILE.md, twenty-fifth pass). The warm-up's compiles take longer, once.
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

/** Three times V8's default of 920 (`--max-inlined-bytecode-size-cumulative`), on both Nodes. */
const INLINED_BYTECODE_BUDGET = 2_760;

/**
 * Sets both, each unless Node's command line (`execArgv`) names it. Before the first WebAssembly
 * module is compiled (undici compiles llhttp on its first connection) and before the hot code is
 * optimized: each holds for compiles that start after it is set.
 */
export function setV8Flags(execArgv: readonly string[] = process.execArgv): void {
  setUnlessGiven("wasm-tiering-budget", WASM_TIERING_BUDGET, execArgv);
  setUnlessGiven("max-inlined-bytecode-size-cumulative", INLINED_BYTECODE_BUDGET, execArgv);
}

function setUnlessGiven(name: string, value: number, execArgv: readonly string[]): void {
  if (execArgv.some((arg) => namesFlag(arg, name))) return;
  setFlagsFromString(`--${name}=${value}`);
}

/** V8 reads `-` and `_` alike in a flag's name, with one or two leading dashes. */
function namesFlag(arg: string, name: string): boolean {
  const given = arg.replace(/^--?/, "").split("=", 1)[0]!.replaceAll("_", "-");
  return given === name;
}
