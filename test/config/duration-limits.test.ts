/**
 * Durations beyond what a Node.js timer can hold are refused: setTimeout turns anything above
 * 2^31 - 1 ms into 1 ms, so "1000h" would make a timeout fire at once and a refresh loop spin.
 */
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { MAX_DURATION_MS } from "../../src/config/units.js";
import { issuesOfText } from "./load-helpers.js";

const messages = async (text: string) =>
  (await issuesOfText(text)).map((i) => `${i.path}: ${i.message}`);

const upstreamWith = (lines: string) =>
  `upstreams:\n  - name: api\n    baseUrl: https://api.example.com\n    clientId: id\n    clientSecret: secret\n${lines}`;

describe("duration limits", () => {
  it("refuses durations longer than the longest Node.js timer, wherever they are", async () => {
    const text = `shutdown:\n  timeout: 1000h\n${upstreamWith("    token:\n      maxBackoff: 2147483648\n    timeouts:\n      bodyIdle: 600h\n")}`;
    expect(await messages(text)).toEqual([
      'shutdown.timeout: expected at most 596h (2147483647 ms, the longest timer Node.js supports), found "1000h" (line 2)',
      "upstreams[0] (api).token.maxBackoff: expected at most 596h (2147483647 ms, the longest timer Node.js supports), found 2147483648 (line 9)",
      'upstreams[0] (api).timeouts.bodyIdle: expected at most 596h (2147483647 ms, the longest timer Node.js supports), found "600h" (line 11)',
    ]);
  });

  it("accepts the longest one", async () => {
    const config = await loadConfig({
      configText: upstreamWith(`    token:\n      defaultExpiresIn: ${MAX_DURATION_MS}\n`),
      env: {},
    });
    expect(config.upstreams[0]?.tokenPolicy.defaultExpiresInMs).toBe(MAX_DURATION_MS);
  });
});
