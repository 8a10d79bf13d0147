/**
 * commands/start-memory.ts: the WebAssembly tier-up (undici's parser) that waits for real
 * traffic. Real V8, real undici: the tier-up is watched in a child process through V8's own
 * compile trace. (That `run` forces no garbage collection once started is
 * test/cli/no-forced-collection.test.ts.)
 */
import { spawn } from "node:child_process";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";

describe("delayWasmTierUp", () => {
  const startMemory = resolve(import.meta.dirname, "../../dist/commands/start-memory.js");
  // Two responses of a token's size through undici, as a start's token request and a refresh
  // (a third tiers up on either budget: that is the first real traffic); then a pause of
  // `pauseMs` for V8's background compile to finish and print.
  const script = (delay: boolean, pauseMs: number) => `
    import { createServer } from "node:http";
    import { request } from "undici";
    ${delay ? `(await import(${JSON.stringify(startMemory)})).delayWasmTierUp();` : ""}
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
  const tiersUp = (delay: boolean): Promise<boolean> =>
    new Promise((resolvePromise, reject) => {
      const child = spawn(
        process.execPath,
        // Node 20's own budget, on any Node: the control must tier up wherever the test runs.
        [
          "--wasm-tiering-budget=1800000",
          "--trace-wasm-compilation-times",
          "--input-type=module",
          "-e",
          script(delay, delay ? 1_500 : 15_000),
        ],
        { cwd: resolve(import.meta.dirname, "../.."), stdio: ["ignore", "pipe", "inherit"] },
      );
      let output = "";
      child.stdout.on("data", (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes("using TurboFan")) child.kill();
      });
      child.once("error", reject);
      child.once("close", () => resolvePromise(output.includes("using TurboFan")));
    });

  it("keeps undici's parser out of TurboFan for a start's token responses", async () => {
    expect(await tiersUp(false)).toBe(true);
    expect(await tiersUp(true)).toBe(false);
  }, 30_000);
});
