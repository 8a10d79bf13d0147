/**
 * Issue 32, the README's first commands as written, in a fresh copy of the repository (what
 * `git clone` gives: the tracked files, plus files not yet committed, no node_modules, no dist):
 * `npm ci` warns of no engine the README's Node 20.19 does not meet, builds dist/, and `npm start`
 * then starts at once instead of building it again; after an edit under src/ it builds first.
 * Then the README's Install section, block by block as written (the package is not on the npm
 * registry): `npx bearer-proxy` from the clone, and `npm pack` + `npm install -g` of the tarball,
 * the global install going to a temporary prefix (npm_config_prefix, its bin first on the PATH).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REMOVE_TREE_TIMEOUT_MS, removeTree } from "../helpers/temp-tree.js";
import { codeBlocks } from "./docs-tools.js";

const run = promisify(execFile);
const root = resolve(import.meta.dirname, "../..");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  version: string;
  engines: { node: string };
};
// fastify's own dependency; only the two functions used here are typed.
const semver = createRequire(import.meta.url)("semver") as {
  minVersion(range: string): { version: string } | null;
  satisfies(version: string, range: string): boolean;
};

let clone: string;
let npmCi: { code: number; output: string };

/** npm as a user runs it: their PATH and HOME (the npm cache), none of this test run's npm_* settings. */
function userEnv(): Record<string, string> {
  // How this machine reaches the registry (a proxy, an extra CA) is the user's shell's too: a
  // global install resolves its dependencies there, where `npm ci` had them all in the lock.
  const network = Object.entries(process.env).filter(
    ([name, value]) =>
      value !== undefined &&
      /^(?:NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR|(?:https?|no)_proxy)$/i.test(name),
  ) as [string, string][];
  return {
    ...Object.fromEntries(network),
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? "/tmp",
    npm_config_update_notifier: "false",
  };
}

/** Run a command in the clone; resolves with its exit code and stdout + stderr in order. */
function inClone(command: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolveRun) => {
    const child = spawn(command, args, { cwd: clone, env: userEnv() });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on("close", (code) => resolveRun({ code: code ?? -1, output }));
  });
}

/** A shell script in the clone under bash -e, with the user's environment plus `env`. */
function inCloneShell(
  script: string,
  env: Record<string, string>,
): Promise<{ code: number; output: string }> {
  return new Promise((resolveRun) => {
    const child = spawn("bash", ["-e", "-c", script], {
      cwd: clone,
      env: { ...userEnv(), ...env },
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on("close", (code) => resolveRun({ code: code ?? -1, output }));
  });
}

/** The shell blocks of the README's `## Install` section, in order. */
function readmeInstallBlocks(): string[] {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const start = readme.indexOf("\n## Install\n");
  const end = readme.indexOf("\n## ", start + 1);
  return codeBlocks(readme.slice(start, end))
    .filter((b) => b.lang === "sh")
    .map((b) => b.text);
}

/**
 * `npm start` on free ports until the demo prints its curl lines; then one Ctrl-C to the whole
 * process group, as a terminal sends it.
 */
async function npmStart(): Promise<{ output: string; proxyUrl: string; stop(): Promise<void> }> {
  const child: ChildProcess = spawn(
    "npm",
    [
      "start",
      "--",
      "--port",
      "0",
      "--admin-port",
      "0",
      "--emulator-port",
      "0",
      "--log-format",
      "json",
    ],
    { cwd: clone, env: userEnv(), detached: true },
  );
  let output = "";
  const exited = new Promise<void>((r) => child.once("close", () => r()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGINT");
    await exited;
  };
  try {
    const proxyUrl = await new Promise<string>((resolveStart, reject) => {
      const timer = setTimeout(() => reject(new Error(`npm start: no demo:\n${output}`)), 240_000);
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        const match = /proxy \(plain HTTP[^)]*\): (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
        if (match?.[1] && output.includes("Stop with Ctrl-C")) {
          clearTimeout(timer);
          resolveStart(match[1]);
        }
      };
      child.stdout?.on("data", onData);
      child.stderr?.on("data", onData);
      void exited.then(() => reject(new Error(`npm start exited:\n${output}`)));
    });
    return { output, proxyUrl, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

beforeAll(async () => {
  clone = mkdtempSync(join(tmpdir(), "bp-fresh-clone-"));
  const { stdout } = await run(
    "git",
    ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    {
      cwd: root,
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  for (const file of stdout.split("\0").filter(Boolean)) {
    const target = join(clone, file);
    mkdirSync(dirname(target), { recursive: true });
    try {
      copyFileSync(join(root, file), target);
    } catch {
      // deleted in the working tree but not yet in git: a clone of the commit-to-be lacks it too
    }
  }
  npmCi = await inClone("npm", ["ci", "--no-audit", "--no-fund"]);
}, 600_000);

afterAll(() => removeTree(clone), REMOVE_TREE_TIMEOUT_MS);

describe("a fresh clone: npm ci && npm start", () => {
  it("npm ci succeeds without an EBADENGINE warning, and builds dist/", () => {
    expect(npmCi.output).not.toMatch(/EBADENGINE/);
    expect(npmCi.code, npmCi.output).toBe(0);
    expect(npmCi.output).toContain("building dist/: dist/cli.js is missing");
    expect(readFileSync(join(clone, "dist/cli.js"), "utf8")).toContain("runCli");
  });

  it("every locked package accepts the Node version package.json promises (any Node running this)", () => {
    const floor = semver.minVersion(pkg.engines.node)?.version ?? "";
    expect(floor).toBe("20.19.0");
    const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as {
      packages: Record<string, { engines?: { node?: string } | string[] }>;
    };
    const refusing = Object.entries(lock.packages).flatMap(([path, entry]) => {
      const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      return range === undefined || semver.satisfies(floor, range) ? [] : [`${path}: ${range}`];
    });
    expect(refusing).toEqual([]);
  });

  it("npm start right after npm ci does not build again, and serves the demo", async () => {
    const started = await npmStart();
    try {
      expect(started.output).toContain("dist/ is up to date with src/: not rebuilding");
      expect(started.output).not.toContain("tsc -p");
      const sheet = await fetch(`${started.proxyUrl}/platform/v1/spreadsheets/demo`);
      expect(sheet.status).toBe(200);
    } finally {
      await started.stop();
    }
  }, 60_000);

  it("npm start after an edit under src/ builds first, and runs the edited code", async () => {
    const demo = join(clone, "src/commands/demo.ts");
    const edited = readFileSync(demo, "utf8").replace(
      "Stop with Ctrl-C.",
      "Stop with Ctrl-C (edited).",
    );
    expect(edited).toContain("(edited)");
    writeFileSync(demo, edited);
    const started = await npmStart();
    try {
      expect(started.output).toContain("building dist/: src changed since the last build");
      expect(started.output).toContain("Stop with Ctrl-C (edited).");
    } finally {
      await started.stop();
    }
    // Built once: the next start is immediate again.
    const again = await npmStart();
    await again.stop();
    expect(again.output).toContain("dist/ is up to date with src/: not rebuilding");
  }, 300_000);
});

describe("the README's Install section, as written, in the clone", () => {
  let prefix: string;
  beforeAll(() => {
    prefix = mkdtempSync(join(tmpdir(), "bp-global-prefix-"));
  });
  afterAll(() => removeTree(prefix), REMOVE_TREE_TIMEOUT_MS);

  it("has the clone's commands, the packed tarball's, the image's and the single executable's", () => {
    const blocks = readmeInstallBlocks();
    expect(blocks).toHaveLength(4);
    expect(blocks[0]).toMatch(/^npm ci\b[^\n]*\nnpx bearer-proxy --version\b/);
    expect(blocks[1]).toMatch(/^npm pack\b[^\n]*\nnpm install -g \.\/bearer-proxy-[\d.]+\.tgz\b/);
    expect(blocks[2]).toMatch(/^docker build -t bearer-proxy:[\d.]+ \./);
    expect(blocks[3]).toMatch(
      /^npm run build:sea\b[^\n]*\n\.\/dist\/sea\/bearer-proxy --version\b/,
    );
  });

  it("npm ci, then npx bearer-proxy from the clone", async () => {
    const { code, output } = await inCloneShell(readmeInstallBlocks()[0]!, {});
    expect(code, output).toBe(0);
    expect(output).toContain(`bearer-proxy ${pkg.version}`);
  }, 300_000);

  it("npm pack, then a global install of the tarball puts a working bearer-proxy on the PATH", async () => {
    const env = { npm_config_prefix: prefix, PATH: `${join(prefix, "bin")}:${userEnv().PATH}` };
    const { code, output } = await inCloneShell(readmeInstallBlocks()[1]!, env);
    expect(code, output).toBe(0);
    expect(output).toContain(`bearer-proxy ${pkg.version}`);
    // It was the global install that answered, from the tarball, not the clone.
    const installed = join(prefix, "lib", "node_modules", "bearer-proxy");
    expect(readFileSync(join(installed, "package.json"), "utf8")).toContain(
      `"version": "${pkg.version}"`,
    );
    const version = await run(join(prefix, "bin", "bearer-proxy"), ["--version"]);
    expect(version.stdout.trim()).toBe(`bearer-proxy ${pkg.version}`);
  }, 300_000);

  it("npm run build:sea, then the single executable answers from the clone", async () => {
    const { code, output } = await inCloneShell(readmeInstallBlocks()[3]!, {});
    expect(code, output).toBe(0);
    expect(output).toContain(`bearer-proxy ${pkg.version}`);
  }, 300_000);
});
