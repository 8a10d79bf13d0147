/**
 * commands/start-memory.ts: the WebAssembly tier-up (undici's parser) that waits for real
 * traffic. Real V8, real undici: the tier-up is watched in a child process through V8's own
 * compile trace. (That `run` forces no garbage collection once started is
 * test/cli/no-forced-collection.test.ts.)
 */
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

describe("delayWasmTierUp", () => {
  const run = promisify(execFile);
  const startMemory = resolve(import.meta.dirname, "../../dist/commands/start-memory.js");
  // Two responses of a token's size through undici, as a start's token request and a refresh
  // (a third tiers up on either budget: that is the first real traffic); then a pause for V8's
  // background compile to finish and print.
  const script = (delay: boolean) => `
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
    await new Promise((r) => setTimeout(r, 1500));
    server.close();
  `;
  const compiles = async (delay: boolean) => {
    const { stdout } = await run(
      process.execPath,
      // Node 20's own budget, on any Node: the control must tier up wherever the test runs.
      [
        "--wasm-tiering-budget=1800000",
        "--trace-wasm-compilation-times",
        "--input-type=module",
        "-e",
        script(delay),
      ],
      { cwd: resolve(import.meta.dirname, "../.."), timeout: 20_000 },
    );
    return stdout.split("\n").filter((line) => line.includes("using TurboFan")).length;
  };

  it("keeps undici's parser out of TurboFan for a start's token responses", async () => {
    expect(await compiles(false)).toBeGreaterThan(0);
    expect(await compiles(true)).toBe(0);
  }, 30_000);
});
