/**
 * Issue #24: an upstream without `dpop` loads nothing of the DPoP room's machinery (key, proofs,
 * nonces): the token source reaches it through a dynamic import on the first fetch that needs a
 * key (dpop/lazy-dpop.ts). Checked in a fresh Node process, as the tracing test does, that runs
 * a token source (src/ transpiled as is) through one fetch with a module hook recording every
 * module resolved; the same harness with `dpop: {}` must see the room, so the check can't pass
 * by seeing nothing.
 */
import { execFile } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { promisify } from "node:util";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTokenSpec } from "../helpers/upstream-config.js";
import { IMMEDIATE_POLICY } from "./support.js";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");

const HOOKS = `
import { appendFileSync } from "node:fs";
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.RESOLVED_LOG, result.url + "\\n");
  return result;
}
`;

const REGISTER = `
import { register } from "node:module";
register("./hooks.mjs", import.meta.url);
`;

// One token source, one fetch (the token endpoint stubbed), then what it handed out.
const MAIN = `
import { createTokenSource } from "./src/token/token-source.js";
const logger = { child() { return logger; }, info() {}, warn() {}, error() {}, debug() {} };
const source = createTokenSource({
  upstream: "api",
  spec: JSON.parse(process.env.SPEC),
  policy: JSON.parse(process.env.POLICY),
  logger,
  secretPollIntervalMs: 0,
  fetchToken: async (_credentials, _signal, dpop) => ({
    accessToken: "opaque-token-value",
    expiresInSeconds: 300,
    scope: undefined,
    expiresInClamped: false,
    ...(dpop ? { tokenType: "DPoP" } : {}),
  }),
});
const token = await source.getToken();
source.close();
console.log(JSON.stringify({ tokenType: token.tokenType, bound: token.dpop !== undefined }));
`;

function listTs(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? listTs(path) : path.endsWith(".ts") ? [path] : [];
  });
}

describe("without dpop, nothing of src/token/dpop is loaded", () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "bp-dpop-load-"));
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
    writeFileSync(join(dir, "package.json"), '{ "type": "module" }');
    // The token side only: it never imports the proxy floor or the composition root.
    const tokenSide = listTs(join(ROOT, "src")).filter(
      (file) => !/\/src\/(proxy|app)\//.test(file),
    );
    for (const file of tokenSide) {
      const { outputText } = ts.transpileModule(readFileSync(file, "utf8"), {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
        fileName: file,
      });
      const out = join(dir, "src", relative(join(ROOT, "src"), file)).replace(/\.ts$/, ".js");
      mkdirSync(dirname(out), { recursive: true });
      writeFileSync(out, outputText);
    }
    writeFileSync(join(dir, "hooks.mjs"), HOOKS);
    writeFileSync(join(dir, "register.mjs"), REGISTER);
    writeFileSync(join(dir, "main.mjs"), MAIN);
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function loadedWith(dpop: { keyFile: undefined; algorithm: undefined } | undefined) {
    const log = join(dir, `resolved-${Math.random().toString(36).slice(2)}.log`);
    writeFileSync(log, "");
    const spec = makeTokenSpec({}, { dpop });
    const { stdout } = await run(process.execPath, ["--import", "./register.mjs", "main.mjs"], {
      cwd: dir,
      env: {
        PATH: process.env.PATH,
        RESOLVED_LOG: log,
        SPEC: JSON.stringify(spec),
        POLICY: JSON.stringify(IMMEDIATE_POLICY),
      },
      timeout: 20_000,
    });
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
      tokenType: string;
      bound: boolean;
    };
    const resolved = readFileSync(log, "utf8").split("\n").filter(Boolean);
    const room = resolved
      .filter((url) => url.includes("/src/token/dpop/"))
      .map((url) => url.slice(url.indexOf("/src/token/dpop/") + "/src/token/dpop/".length));
    return { ...result, resolved, room: [...new Set(room)].sort() };
  }

  it("off: only the lazy loader of the room is resolved", async () => {
    const off = await loadedWith(undefined);
    expect(off).toMatchObject({ tokenType: "Bearer", bound: false });
    expect(off.resolved.some((url) => url.endsWith("/src/token/token-source.js"))).toBe(true);
    expect(off.room).toEqual(["lazy-dpop.js"]);
  });

  it("on (control): the same harness sees the room", async () => {
    const on = await loadedWith({ keyFile: undefined, algorithm: undefined });
    expect(on).toMatchObject({ tokenType: "DPoP", bound: true });
    expect(on.room).toEqual(
      expect.arrayContaining([
        "dpop-key.js",
        "index.js",
        "lazy-dpop.js",
        "nonce-store.js",
        "proof.js",
      ]),
    );
  });
});
