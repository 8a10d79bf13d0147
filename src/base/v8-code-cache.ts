/**
 * V8's code cache for the bundle's chunks (issue 33: start → ready). A start spends ~30 ms of
 * CPU compiling the functions it runs; V8 can save their bytecode after they ran
 * (`script.createCachedData()`) and take it back on the next start instead of compiling again.
 *
 * `bearer-proxy code-cache` writes the cache beside the bundle (the image does it at build time,
 * as root, so the running process can read it but never change it); every later start of that
 * bundle on the same Node reads it. Node's own compile cache (`module.enableCompileCache`, Node
 * 22+) was measured and did not move a start: it saves a script as compiled, before it ran, so it
 * holds the top level but none of the functions the start goes on to compile
 * (bench/PROFILE.md, "The code cache").
 *
 * What makes reading a cache safe:
 * - it is read only from `<bundle>/code-cache/<node version>-<arch>/`, a directory written by
 *   the same hands as the code beside it (never a temporary or user-writable one);
 * - each file is named for a digest of its chunk's text, so a chunk that changed finds no cache,
 *   even one of the same length (V8 checks only the length). Not the file's size and mtime, as
 *   Python's .pyc: an image layer may keep mtimes to the second only;
 * - V8 checks its version and flags itself and rejects a cache made under others. The first
 *   rejection stops the reading: every other file was made under the same flags.
 *
 * Process-wide state, by necessity: a CommonJS loader hook is one per process.
 */

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import Module from "node:module";
import { basename, dirname, join } from "node:path";
import { Script, constants as vmConstants } from "node:vm";

/** What a start took from the cache; `code-cache` and a debug log line report it. */
export interface CodeCacheState {
  dir: string;
  /** Whether `dir` existed when the process started. */
  found: boolean;
  /** Chunks compiled from the cache. */
  used: number;
  /** Chunks whose cache V8 refused (another Node build or other V8 flags). */
  rejected: number;
  /** Chunks compiled from their text: no cache file, a refused one, or after a refusal. */
  fromSource: number;
}

interface CompiledChunk {
  script: Script;
  cacheFile: string;
}

type CompileFn = (this: Module, content: string, filename: string, ...rest: unknown[]) => unknown;

let state: CodeCacheState | undefined;
const recorded: CompiledChunk[] = [];

/** The cache directory of `bundleDir` for this Node. */
export function codeCacheDir(bundleDir: string): string {
  return join(bundleDir, "code-cache", `${process.version}-${process.arch}`);
}

/**
 * From now on, compile the bundle's chunks (`.cjs` files directly in `bundleDir`) with their
 * cache when there is one. `record` keeps every compiled chunk for `writeCodeCache`.
 */
export function installCodeCache(bundleDir: string, options: { record: boolean }): void {
  if (state !== undefined) return;
  const dir = codeCacheDir(bundleDir);
  const found = existsSync(dir);
  const current: CodeCacheState = { dir, found, used: 0, rejected: 0, fromSource: 0 };
  state = current;
  let reading = found && !options.record;
  if (!reading && !options.record) return;
  const prototype = Module.prototype as unknown as { _compile: CompileFn };
  const compile = prototype._compile;
  prototype._compile = function compileWithCache(content, filename, ...rest) {
    // After a refusal the rest would be refused too: Node's own compile, as with no cache.
    if (
      dirname(filename) !== bundleDir ||
      !filename.endsWith(".cjs") ||
      !(reading || options.record)
    ) {
      return compile.call(this, content, filename, ...rest);
    }
    const cacheFile = join(dir, `${basename(filename)}.${digestOf(content)}.v8`);
    const cachedData = reading ? readIfPresent(cacheFile) : undefined;
    const script = new Script(Module.wrap(withoutHashbang(content)), {
      filename,
      cachedData,
      importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
    });
    // V8's own verdict: `cachedDataRejected` is set only when it was given a cache.
    if (script.cachedDataRejected === false) current.used++;
    else {
      current.fromSource++;
      if (script.cachedDataRejected === true) {
        current.rejected++;
        reading = false;
      }
    }
    if (options.record) recorded.push({ script, cacheFile });
    const wrapper = script.runInThisContext({ displayErrors: true }) as (
      ...args: unknown[]
    ) => unknown;
    return wrapper.call(
      this.exports,
      this.exports,
      Module.createRequire(filename),
      this,
      filename,
      dirname(filename),
    );
  };
}

/** What this process took from the cache; undefined outside the bundle. */
export function codeCacheState(): CodeCacheState | undefined {
  return state === undefined ? undefined : { ...state };
}

/**
 * Save the bytecode of every chunk compiled so far, with every function that has run: call it
 * after the work worth caching. Each file is written whole or not at all (a rename).
 */
export function writeCodeCache(): { dir: string; files: number; bytes: number } {
  if (state === undefined || recorded.length === 0) {
    throw new Error("no chunk was recorded: code-cache runs only from the bundle (cli.cjs)");
  }
  mkdirSync(state.dir, { recursive: true });
  let bytes = 0;
  for (const { script, cacheFile } of recorded) {
    const data = script.createCachedData();
    const partial = `${cacheFile}.${process.pid}.tmp`;
    writeFileSync(partial, data);
    renameSync(partial, cacheFile);
    bytes += data.length;
  }
  return { dir: state.dir, files: recorded.length, bytes };
}

/**
 * sha1 of the chunk's bytes, 16 hex digits. The bundle is ASCII (build-bundle.mjs `charset`), so
 * latin1 gives the file's bytes without the UTF-8 encoder: 2.7 ms for the 1.3 MB a start loads,
 * against 4.7–5.5 ms for the default encoding.
 */
function digestOf(content: string): string {
  return createHash("sha1").update(content, "latin1").digest("hex").slice(0, 16);
}

function readIfPresent(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

/** Node strips a chunk's `#!` line itself; inside the wrapper it would be a syntax error. */
function withoutHashbang(content: string): string {
  return content.startsWith("#!") ? `//${content}` : content;
}
