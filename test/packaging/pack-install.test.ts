/**
 * What the container image does, without a Docker engine: pack the package, install the tarball
 * with --omit=dev into an empty folder, and run the CLI from there — under this Node and under the
 * image's Node major (from the npm registry's `node` package). Catches runtime dependencies kept
 * in devDependencies and files left out of package.json "files".
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REMOVE_TREE_TIMEOUT_MS, removeTree } from "../helpers/temp-tree.js";
import { exerciseDemo } from "./demo-process.js";

const run = promisify(execFile);
const root = resolve(import.meta.dirname, "../..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  version: string;
  bin: Record<string, string>;
};
/** The Node major of the runtime image (Dockerfile: distroless nodejs24). */
const IMAGE_NODE_MAJOR = 24;

let work: string;
let installDir: string;
/** The package's bin: the bundled CLI (dist/bundle/cli.cjs). */
let cli: string;
/** The unbundled CLI, as `npm start` and the library's users run it. */
let unbundledCli: string;
let imageNode: string;

async function npm(args: string[], cwd: string): Promise<string> {
  const { stdout } = await run("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], {
    cwd,
    maxBuffer: 32 * 1024 * 1024,
    env: { ...process.env, npm_config_update_notifier: "false" },
  });
  return stdout;
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "bp-pack-"));
  // --ignore-scripts: pack the dist/ `npm test` built. Letting `prepare` rebuild it here would
  // rewrite dist/ under the CLI tests running in the other workers.
  const packed = JSON.parse(
    await npm(["pack", "--json", "--ignore-scripts", "--pack-destination", work], root),
  ) as {
    filename: string;
  }[];
  const tarball = join(work, packed[0]?.filename ?? "");
  installDir = join(work, "app");
  const nodeDir = join(work, "node");
  for (const dir of [installDir, nodeDir]) {
    await run("mkdir", ["-p", dir]);
    writeFileSync(join(dir, "package.json"), '{ "private": true }\n');
  }
  await Promise.all([
    npm(["install", "--omit=dev", tarball], installDir),
    npm(["install", `node@${IMAGE_NODE_MAJOR}`], nodeDir),
  ]);
  cli = join(installDir, "node_modules/bearer-proxy", pkg.bin["bearer-proxy"] ?? "");
  unbundledCli = join(installDir, "node_modules/bearer-proxy/dist/cli.js");
  imageNode = join(nodeDir, "node_modules/.bin/node");
}, 240_000);

afterAll(() => removeTree(work), REMOVE_TREE_TIMEOUT_MS);

async function exercise(node: string) {
  expect(cli).toMatch(/dist\/bundle\/cli\.cjs$/);
  for (const entry of [cli, unbundledCli]) {
    const { stdout } = await run(node, [entry, "--version"]);
    expect(stdout.trim()).toBe(`bearer-proxy ${pkg.version}`);
  }

  await exerciseDemo([node, cli], installDir);
}

describe("the packed package, installed with --omit=dev", () => {
  it("runs --version and proxies for the demo under this Node", async () => {
    await exercise(process.execPath);
  }, 60_000);

  it(`does the same under the image's Node ${IMAGE_NODE_MAJOR}`, async () => {
    const { stdout } = await run(imageNode, ["--version"]);
    expect(stdout.trim().startsWith(`v${IMAGE_NODE_MAJOR}.`)).toBe(true);
    await exercise(imageNode);
  }, 60_000);
});
