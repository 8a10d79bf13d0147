/**
 * commands/v8-flags.ts: the V8 settings a bearer-proxy process makes for itself. Real V8, real
 * undici: each is watched in a child process through V8's own traces — the WebAssembly tier-up
 * of undici's parser (`--trace-wasm-compilation-times`) and TurboFan's inlining decisions
 * (`--trace-turbo-inlining`). (That `run` forces no garbage collection once started is
 * test/cli/no-forced-collection.test.ts.)
 */
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

const v8Flags = resolve(import.meta.dirname, "../../dist/commands/v8-flags.js");
const root = resolve(import.meta.dirname, "../..");

/** Runs `node ...args`; resolves with its stdout, or with what it printed up to `stopAt`. */
function runChild(args: string[], stopAt?: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: root,
      stdio: ["ignore", "pipe", "inherit"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      if (stopAt !== undefined && output.includes(stopAt)) child.kill();
    });
    child.once("error", reject);
    child.once("close", () => resolvePromise(output));
  });
}

describe("the WebAssembly tier-up budget", () => {
  // Two responses of a token's size through undici, as a start's token request and a refresh
  // (a third tiers up on either budget: that is the first real traffic); then a pause of
  // `pauseMs` for V8's background compile to finish and print. `setV8Flags([])`: as if Node's
  // command line named no flag, since the child's names Node 20's budget for the control.
  const script = (delay: boolean, pauseMs: number) => `
    import { createServer } from "node:http";
    import { request } from "undici";
    ${delay ? `(await import(${JSON.stringify(v8Flags)})).setV8Flags([]);` : ""}
    const body = JSON.stringify({ access_token: "x".repeat(900), token_type: "Bearer", expires_in: 600 });
    const server = createServer((_q, s) => s.end(body)).listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    for (let i = 0; i < 2; i++) {
      const response = await request("http://127.0.0.1:" + server.address().port + "/token");
      await response.body.text();
    }
    await new Promise((r) => setTimeout(r, ${pauseMs}));
    server.close();
  `;
  /**
   * Whether V8 printed a TurboFan compile of the parser before the child ended. The control
   * waits up to 15 s and is ended at the first such line (a loaded machine's background compile
   * is late, not absent); the delayed case is given 1.5 s, in which the control compiles.
   */
  const tiersUp = async (delay: boolean): Promise<boolean> => {
    const output = await runChild(
      [
        // Node 20's own budget, on any Node: the control must tier up wherever the test runs.
        "--wasm-tiering-budget=1800000",
        "--trace-wasm-compilation-times",
        "--input-type=module",
        "-e",
        script(delay, delay ? 1_500 : 15_000),
      ],
      "using TurboFan",
    );
    return output.includes("using TurboFan");
  };

  it("keeps undici's parser out of TurboFan for a start's token responses", async () => {
    expect(await tiersUp(false)).toBe(true);
    expect(await tiersUp(true)).toBe(false);
  }, 30_000);
});

describe("the inlining budget", () => {
  // Eight callees of 176 bytes of bytecode each (1,408 in all), called from one function that
  // V8 optimizes at once (%OptimizeFunctionOnNextCall): V8's default budget of 920 takes five
  // of them, the process's (three times that) all eight.
  const probe = (set: boolean) => `
    ${set ? `(await import(${JSON.stringify(v8Flags)})).setV8Flags();` : ""}
    const source = [];
    for (let i = 0; i < 8; i++) {
      source.push(\`function callee\${i}(a, b) {
        let s = a;
        for (let j = 0; j < b; j++) { s = (s * 31 + j) | 0; if (s & 1) s ^= \${i + 1}; else s += \${i + 2}; }
        if (s > 1000) s -= a * 3; else if (s < -1000) s += b * 5; else s = s * 2 + \${i};
        if (a > b) s += a - b; else s -= b - a;
        return s + (a & 7) + (b | 3) + ((a ^ b) >> 1) + \${i};
      }\`);
    }
    const calls = [0, 1, 2, 3, 4, 5, 6, 7].map((i) => \`callee\${i}(a, b)\`).join(" + ");
    source.push(\`function caller(a, b) { return \${calls}; }\`);
    source.push("%PrepareFunctionForOptimization(caller);");
    source.push("for (let k = 0; k < 50; k++) caller(k, 4);");
    source.push("%OptimizeFunctionOnNextCall(caller); caller(5, 6);");
    (0, eval)(source.join("\\n"));
  `;
  /** How many of the eight callees TurboFan inlined into `caller`. */
  const inlined = async (set: boolean, nodeFlags: string[] = []): Promise<number> => {
    const output = await runChild([
      "--allow-natives-syntax",
      "--trace-turbo-inlining",
      ...nodeFlags,
      "--input-type=module",
      "-e",
      probe(set),
    ]);
    return output.match(/^Inlining .*callee\d.* into .*caller/gm)?.length ?? 0;
  };

  it("lets TurboFan inline three times V8's default into one function", async () => {
    const [without, withBudget] = await Promise.all([inlined(false), inlined(true)]);
    expect(without).toBe(5);
    expect(withBudget).toBe(8);
  }, 30_000);

  it("leaves a budget named on Node's command line as it is", async () => {
    expect(await inlined(true, ["--max_inlined_bytecode_size_cumulative=920"])).toBe(5);
  }, 30_000);
});
