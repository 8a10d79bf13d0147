/**
 * The image's runtime stage without a Docker engine: the files its COPY instructions take from
 * the build stage are laid out in an empty folder as they would be under /app, and its
 * ENTRYPOINT runs there with this Node — the bundle must work with no node_modules but the
 * native bcrypt addon, and no package.json.
 */
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REMOVE_TREE_TIMEOUT_MS, removeTree } from "../helpers/temp-tree.js";
import { exerciseDemo } from "./demo-process.js";
import { args, DOCKERFILE, parseDockerfile } from "./dockerfile-parse.js";
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

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), "bp-image-"));
  const app = join(root, RUNTIME_WORKDIR);
  for (const copy of args(runtime, "COPY")) {
    const [from, to] = copy.replace(/^--from=build\s+/, "").split(/\s+/);
    const source = join(REPO_ROOT, (from ?? "").replace(new RegExp(`^${BUILD_WORKDIR}/`), ""));
    expect(existsSync(source), `${source} (run npm run build)`).toBe(true);
    cpSync(source, join(app, to ?? ""), { recursive: true });
  }
  const [node, ...rest] = JSON.parse(args(runtime, "ENTRYPOINT")[0] ?? "[]") as string[];
  expect(node).toBe("/nodejs/bin/node");
  entrypoint = [
    process.execPath,
    ...rest.map((a) => a.replace(new RegExp(`^${RUNTIME_WORKDIR}/`), `${app}/`)),
  ];
});

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
});
