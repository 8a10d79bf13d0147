/**
 * A single executable (Node's single executable applications, linux-x64): the bundle inlined
 * into one CommonJS file (scripts/build-bundle.mjs --single-file) and injected into a copy of a
 * `node` binary, so `bearer-proxy` runs with no Node installed and no node_modules — the
 * one-file install the Go sidecars have.
 *
 *   node scripts/build-sea.mjs [--node PATH] [--out FILE]
 *
 * --node: the binary to copy, and to prepare the blob with (they must be the same Node; default
 * this one; CI uses Node 24, the image's). --out: default dist/sea/bearer-proxy.
 *
 * What differs from the bundle: the callers' password checks find no `@node-rs/bcrypt` (a native
 * addon can't be embedded) unless a node_modules with it sits beside the executable, and fall
 * back to bcryptjs on the event loop with a warning (src/callers/password-checks.ts);
 * `log.format: pretty` prints in-process instead of in pino's worker thread
 * (src/observability/logger.ts).
 */
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { inject } from "postject";
import { buildBundle } from "./build-bundle.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
/** Node's fuse for the blob (the same in every Node with single executable applications). */
const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";

/** Build the executable; resolves with its path. */
export async function buildSea({
  node = process.execPath,
  out = join(ROOT, "dist/sea/bearer-proxy"),
} = {}) {
  const work = join(dirname(out), "sea-build");
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  await buildBundle({ outDir: work, singleFile: true });
  const config = {
    main: join(work, "cli.cjs"),
    output: join(work, "sea-prep.blob"),
    disableExperimentalSEAWarning: true,
    // V8's code cache for the script, made now: less to compile at each start.
    useCodeCache: true,
  };
  writeFileSync(join(work, "sea-config.json"), JSON.stringify(config, null, 2));
  execFileSync(node, ["--experimental-sea-config", join(work, "sea-config.json")], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  rmSync(out, { force: true });
  copyFileSync(node, out);
  chmodSync(out, 0o755);
  await inject(out, "NODE_SEA_BLOB", readFileSync(config.output), { sentinelFuse: SEA_FUSE });
  rmSync(work, { recursive: true, force: true });
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({
    options: { node: { type: "string" }, out: { type: "string" } },
  });
  const out = await buildSea({
    ...(values.node ? { node: resolve(values.node) } : {}),
    ...(values.out ? { out: resolve(values.out) } : {}),
  });
  process.stderr.write(`build-sea: ${out}\n`);
}
