#!/usr/bin/env node
/**
 * The bundle's entry (dist/bundle/cli.cjs; scripts/build-bundle.mjs): two things that must
 * happen before any other chunk is compiled, then the CLI.
 * - V8's flags are final before the first chunk is compiled: a code cache is valid only under the
 *   flags it was made with, and the process sets two (commands/v8-flags.ts).
 * - The chunks compile with their code cache when the bundle has one (base/v8-code-cache.ts).
 * `npm start` and the tests run dist/cli.js, which has neither and needs neither.
 */
import { installCodeCache } from "./base/v8-code-cache.js";
import { setV8Flags } from "./commands/v8-flags.js";

setV8Flags();
installCodeCache(__dirname, { record: process.argv[2] === "code-cache" });
// A dynamic import: the bundler turns it into a require of the CLI's chunk that runs after the
// lines above, where a static import would be hoisted above them.
import("./cli.js").catch((error: unknown) => {
  process.stderr.write(`bearer-proxy: cannot load the CLI: ${String(error)}\n`);
  process.exitCode = 1;
});
