/**
 * Issue #33, start → ready: `bearer-proxy code-cache` saves V8's code cache beside the bundle,
 * and a later start of that bundle compiles its chunks from it (src/base/v8-code-cache.ts). Each
 * test works on its own copy of dist/bundle, as the image has its own: the suite's other files
 * run dist/bundle itself, with no cache. What is checked is what the start reports (a debug log
 * line) and that the proxy it started serves: a cache that V8 refuses, or one of a chunk whose
 * text changed, must cost the start its speed and nothing else.
 */
import { execFile } from "node:child_process";
import {
  cpSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { request } from "undici";
import { afterAll, describe, expect, it } from "vitest";
import { startHostileWorld } from "../hostile/support/hostile-world.js";
import { REPO_ROOT } from "./schema-tools.js";

const run = promisify(execFile);
const BUNDLE = join(REPO_ROOT, "dist/bundle");
const CACHE_DIR = `code-cache/${process.version}-${process.arch}`;

interface CodeCacheReport {
  found: boolean;
  used: number;
  rejected: number;
  fromSource: number;
}

const scratch = mkdtempSync(join(tmpdir(), "bp-code-cache-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A copy of the bundle with no cache in it. */
function copyOfBundle(name: string): string {
  const dir = join(scratch, name);
  cpSync(BUNDLE, dir, { recursive: true, filter: (src) => src !== join(BUNDLE, "code-cache") });
  return dir;
}

async function writeCache(bundle: string): Promise<string> {
  const { stdout } = await run(process.execPath, [join(bundle, "cli.cjs"), "code-cache"], {
    env: { PATH: process.env.PATH },
    timeout: 60_000,
  });
  return stdout;
}

/** Start the copy's `run` at debug level; what it reported of the cache, after one request. */
async function startFrom(bundle: string): Promise<{ report: CodeCacheReport; level: string }> {
  const world = await startHostileWorld({
    cli: join(bundle, "cli.cjs"),
    config: { log: { level: "debug" } },
  });
  try {
    const answer = await request(`${world.proxy.proxyUrl}/echo/hello`);
    await answer.body.dump();
    expect(answer.statusCode).toBe(200);
    const record = world.logs().find((r) => r.codeCache !== undefined);
    expect(record, "the start reports its code cache").toBeDefined();
    return { report: record?.codeCache as CodeCacheReport, level: String(record?.level) };
  } finally {
    await world.close();
  }
}

/** The cache file of the chunk named `name` ("run" for run.XXXXXXXX.cjs). */
function cacheFileOf(bundle: string, name: string): string {
  const file = readdirSync(join(bundle, CACHE_DIR)).find((f) =>
    new RegExp(`^${name}\\.[\\w-]{8}\\.cjs\\.[0-9a-f]{16}\\.v8$`).test(f),
  );
  if (file === undefined) throw new Error(`no cache file for chunk ${name}`);
  return join(bundle, CACHE_DIR, file);
}

describe("the bundle's code cache", () => {
  it("code-cache writes a file per chunk; the next start compiles from them and serves", async () => {
    const bundle = copyOfBundle("written");
    // Control: the same copy with no cache compiles every chunk from its text.
    const before = await startFrom(bundle);
    expect(before.report).toMatchObject({ found: false, used: 0, rejected: 0 });

    const stdout = await writeCache(bundle);
    expect(stdout).toMatch(/^bearer-proxy code-cache: \d+ chunks, \d+ KiB, in .*code-cache/);
    const files = readdirSync(join(bundle, CACHE_DIR));
    expect(files.filter((f) => f.endsWith(".v8")).length).toBeGreaterThanOrEqual(10);
    // Written whole: no partial file left behind.
    expect(files.filter((f) => f.endsWith(".tmp"))).toEqual([]);

    const after = await startFrom(bundle);
    expect(after.report).toMatchObject({ found: true, rejected: 0 });
    // The start's chunks (cli, config, run, undici, …): every one it loads came from the cache.
    expect(after.report.used).toBeGreaterThanOrEqual(10);
    expect(after.report.fromSource).toBe(0);
    expect(after.level).toBe("debug");
  }, 120_000);

  it("a cache file that is not its chunk's is refused: the start compiles from source, says so, and serves", async () => {
    const bundle = copyOfBundle("refused");
    await writeCache(bundle);
    // Same name, another chunk's bytecode: only V8's own check (the source's length) can tell.
    writeFileSync(cacheFileOf(bundle, "run"), readFileSync(cacheFileOf(bundle, "undici-core")));
    const { report, level } = await startFrom(bundle);
    expect(report.rejected).toBe(1);
    expect(report.fromSource).toBeGreaterThanOrEqual(1);
    expect(level).toBe("info");
  }, 120_000);

  it("a chunk whose text changed finds no cache of its own", async () => {
    const bundle = copyOfBundle("changed");
    await writeCache(bundle);
    const runChunk = readdirSync(bundle).find((f) => /^run\.[\w-]{8}\.cjs$/.test(f));
    if (runChunk === undefined) throw new Error("no run chunk in the bundle");
    // Same length, which is all V8 checks; the cache file's name (a digest of the text) sees the
    // change. Its mtime is put back: the name must not depend on it (an image layer rounds it).
    const path = join(bundle, runChunk);
    const text = readFileSync(path, "utf8");
    const { atime, mtime } = statSync(path);
    writeFileSync(path, text.replace("bearer-proxy", "bearer-prozy"));
    utimesSync(path, atime, mtime);
    const { report } = await startFrom(bundle);
    expect(report).toMatchObject({ found: true, rejected: 0 });
    expect(report.fromSource).toBe(1);
    expect(report.used).toBeGreaterThanOrEqual(10);
  }, 120_000);

  it("code-cache refuses to run from the unbundled build", async () => {
    const failed = await run(process.execPath, [join(REPO_ROOT, "dist/cli.js"), "code-cache"], {
      env: { PATH: process.env.PATH },
    }).catch((error: { code: number; stderr: string }) => error);
    expect(failed).toMatchObject({ code: 2 });
    expect((failed as { stderr: string }).stderr).toMatch(/only the bundle has a code cache/);
  });
});
