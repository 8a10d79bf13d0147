/**
 * What the container image does, without a Docker engine: pack the package, install the tarball
 * with --omit=dev into an empty folder, and run the CLI from there — under this Node and under the
 * image's Node major (from the npm registry's `node` package). Catches runtime dependencies kept
 * in devDependencies and files left out of package.json "files".
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = resolve(import.meta.dirname, "../..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string };
/** The Node major of the runtime image (Dockerfile: distroless nodejs24). */
const IMAGE_NODE_MAJOR = 24;

let work: string;
let installDir: string;
let cli: string;
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
  cli = join(installDir, "node_modules/bearer-proxy/dist/cli.js");
  imageNode = join(nodeDir, "node_modules/.bin/node");
}, 240_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** Start `bearer-proxy demo` on free ports and resolve the proxy's URL once it printed it. */
function startDemo(
  node: string,
): Promise<{ child: ChildProcess; proxyUrl: string; output: () => string }> {
  const child = spawn(
    node,
    [
      cli,
      "demo",
      "--port",
      "0",
      "--admin-port",
      "0",
      "--emulator-port",
      "0",
      "--log-format",
      "json",
    ],
    {
      cwd: installDir,
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`demo did not start:\n${output}`)), 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /proxy \(plain HTTP[^)]*\): (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolvePromise({ child, proxyUrl: match[1], output: () => output });
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.on("exit", (code) => reject(new Error(`demo exited with ${code}:\n${output}`)));
  });
}

async function exercise(node: string) {
  const { stdout } = await run(node, [cli, "--version"]);
  expect(stdout.trim()).toBe(`bearer-proxy ${pkg.version}`);

  const demo = await startDemo(node);
  try {
    const sheet = await fetch(`${demo.proxyUrl}/platform/v1/spreadsheets/demo`);
    expect(sheet.status).toBe(200);
    expect(((await sheet.json()) as { id?: string }).id).toBe("demo");
    const scripts = await fetch(`${demo.proxyUrl}/scripts`);
    expect(scripts.status).toBe(200);
  } finally {
    const exited = new Promise<number | null>((r) => demo.child.once("exit", r));
    demo.child.kill("SIGTERM");
    expect(await exited).toBe(0);
  }
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
