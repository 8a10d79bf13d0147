/**
 * The image's runtime stage without a Docker engine: the files its COPY instructions take from
 * the build stage are laid out in an empty folder as they would be under /app, and its
 * ENTRYPOINT runs there with this Node — the bundle must work with no node_modules but the
 * native bcrypt addon, and no package.json. Its one RUN (exec form: `code-cache`) runs there too,
 * under the stage's NODE_OPTIONS, and the start after it must compile from that cache.
 */
import { execFile, spawn } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REMOVE_TREE_TIMEOUT_MS, removeTree } from "../helpers/temp-tree.js";
import { exerciseDemo } from "./demo-process.js";
import { args, DOCKERFILE, envValue, parseDockerfile } from "./dockerfile-parse.js";
import { REPO_ROOT } from "./schema-tools.js";

const run = promisify(execFile);
const [build = [], runtime = []] = parseDockerfile(DOCKERFILE);
const BUILD_WORKDIR = args(build, "WORKDIR")[0] ?? "/src";
const RUNTIME_WORKDIR = args(runtime, "WORKDIR")[0] ?? "/app";
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
  version: string;
};

let root: string;
/** The ENTRYPOINT, with the image's node replaced by this one and /app by the copy. */
let entrypoint: string[];
/** The stage's NODE_OPTIONS (its ENV), under which the build's RUN and every start run. */
let imageNodeOptions: string;

/** An exec-form instruction of the stage, with the image's node replaced by this one and /app by `app`. */
function onThisMachine(execForm: string, app: string): string[] {
  const [node, ...rest] = JSON.parse(execForm) as string[];
  expect(node).toBe("/nodejs/bin/node");
  return [
    process.execPath,
    ...rest.map((a) => a.replace(new RegExp(`^${RUNTIME_WORKDIR}/`), `${app}/`)),
  ];
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "bp-image-"));
  const app = join(root, RUNTIME_WORKDIR);
  for (const copy of args(runtime, "COPY")) {
    const [from, to] = copy.replace(/^--from=build\s+/, "").split(/\s+/);
    const source = join(REPO_ROOT, (from ?? "").replace(new RegExp(`^${BUILD_WORKDIR}/`), ""));
    expect(existsSync(source), `${source} (run npm run build)`).toBe(true);
    cpSync(source, join(app, to ?? ""), { recursive: true });
  }
  imageNodeOptions = envValue(runtime, "NODE_OPTIONS") ?? "";
  for (const command of args(runtime, "RUN")) {
    const [node = "", ...rest] = onThisMachine(command, app);
    await run(node, rest, {
      cwd: root,
      env: { PATH: process.env.PATH, NODE_OPTIONS: imageNodeOptions },
      timeout: 60_000,
    });
  }
  entrypoint = onThisMachine(args(runtime, "ENTRYPOINT")[0] ?? "[]", app);
}, 90_000);

afterAll(() => removeTree(root), REMOVE_TREE_TIMEOUT_MS);

describe("the image's runtime files", () => {
  it("hold no node_modules where the bundle could find a dependency, but @node-rs", () => {
    const app = join(root, RUNTIME_WORKDIR);
    for (let dir = dirname(app); dir !== dirname(dir); dir = dirname(dir)) {
      expect(existsSync(join(dir, "node_modules")), dir).toBe(false);
    }
    expect(existsSync(join(app, "node_modules/@node-rs/bcrypt"))).toBe(true);
    expect(existsSync(join(app, "package.json"))).toBe(false);
  });

  it("run --version from the bundle (the version is built in)", async () => {
    const [node = "", ...cli] = entrypoint;
    const { stdout } = await run(node, [...cli, "--version"], { cwd: root });
    expect(stdout.trim()).toBe(`bearer-proxy ${pkg.version}`);
  });

  it("proxy for the demo (emulator, token, forwarded request)", async () => {
    await exerciseDemo(entrypoint, root);
  }, 60_000);

  it("find the native bcrypt binding from the bundle's folder", async () => {
    const bundleDir = dirname(entrypoint[1] ?? "");
    const { stdout } = await run(
      process.execPath,
      [
        "-e",
        `const b = require(require.resolve("@node-rs/bcrypt", { paths: [${JSON.stringify(bundleDir)}] })); process.stdout.write(String(b.verifySync("x", b.hashSync("x", 4))))`,
      ],
      { cwd: root },
    );
    expect(stdout).toBe("true");
  });

  it("start from the code cache the build's RUN made", async () => {
    const cacheDir = join(
      dirname(entrypoint[1] ?? ""),
      `code-cache/${process.version}-${process.arch}`,
    );
    expect(readdirSync(cacheDir).filter((f) => f.endsWith(".v8")).length).toBeGreaterThan(10);
    const [node = "", ...cli] = entrypoint;
    // The start's report comes before its first token request: an upstream nobody serves will do.
    const child = spawn(
      node,
      [
        ...cli,
        "run",
        "--base-url",
        "https://127.0.0.1:9",
        "--client-id",
        "c",
        "--client-secret",
        "s",
      ],
      {
        cwd: root,
        env: {
          PATH: process.env.PATH,
          NODE_OPTIONS: imageNodeOptions,
          BEARER_PROXY_LOG_LEVEL: "debug",
          BEARER_PROXY_LISTEN: "127.0.0.1:0",
          BEARER_PROXY_ADMIN_LISTEN: "127.0.0.1:0",
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    try {
      const report = await new Promise<Record<string, unknown>>((resolve, reject) => {
        let text = "";
        child.stdout.on("data", (chunk: Buffer) => {
          text += chunk.toString();
          // Whole lines only: the last piece may be a line still being written.
          const line = text
            .split("\n")
            .slice(0, -1)
            .find((l) => l.includes('"codeCache"'));
          if (line) resolve((JSON.parse(line) as { codeCache: Record<string, unknown> }).codeCache);
        });
        child.once("exit", (code) => reject(new Error(`exited ${code} before reporting: ${text}`)));
      });
      expect(report).toMatchObject({ found: true, rejected: 0, fromSource: 0 });
      expect(report.used).toBeGreaterThan(10);
    } finally {
      child.kill("SIGKILL");
    }
  }, 30_000);
});
