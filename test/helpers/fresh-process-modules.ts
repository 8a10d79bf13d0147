/**
 * "Which modules does this load?" checked in a fresh Node process: the test runner's own module
 * graph can't tell. `useFreshProcess` copies the given src/ files (transpiled as is) into a temp
 * folder with node_modules linked, and runs a `main.mjs` there under a module hook that records
 * every module resolved.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import ts from "typescript";
import { afterAll, beforeAll } from "vitest";

const run = promisify(execFile);

/** The repository root. */
export const ROOT = resolve(import.meta.dirname, "../..");

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

export interface FreshProcessOptions {
  /** Prefix of the temp folder's name. */
  prefix: string;
  /** TypeScript files to transpile: absolute path → path of the `.js` inside the temp folder. */
  sources: () => [from: string, to: string][];
  /** The ES module the process runs; it prints its result as JSON on its last stdout line. */
  main: string;
}

export interface FreshProcessRun<T> {
  /** The JSON of main's last stdout line. */
  result: T;
  /** Every module URL resolved, in order. */
  resolved: string[];
}

/** Sets the folder up in `beforeAll`, removes it in `afterAll`; `run` starts one process. */
export function useFreshProcess(options: FreshProcessOptions) {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), options.prefix));
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
    writeFileSync(join(dir, "package.json"), '{ "type": "module" }');
    for (const [from, to] of options.sources()) {
      const { outputText } = ts.transpileModule(readFileSync(from, "utf8"), {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
        fileName: from,
      });
      const out = join(dir, to);
      mkdirSync(dirname(out), { recursive: true });
      writeFileSync(out, outputText);
    }
    writeFileSync(join(dir, "hooks.mjs"), HOOKS);
    writeFileSync(join(dir, "register.mjs"), REGISTER);
    writeFileSync(join(dir, "main.mjs"), options.main);
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  return {
    /** Run main.mjs once with `env` (plus PATH and the hook's log file). */
    async run<T>(env: Record<string, string>): Promise<FreshProcessRun<T>> {
      const log = join(dir, `resolved-${Math.random().toString(36).slice(2)}.log`);
      writeFileSync(log, "");
      const { stdout } = await run(process.execPath, ["--import", "./register.mjs", "main.mjs"], {
        cwd: dir,
        env: { PATH: process.env.PATH, RESOLVED_LOG: log, ...env },
        timeout: 20_000,
      });
      const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as T;
      const resolved = readFileSync(log, "utf8").split("\n").filter(Boolean);
      return { result, resolved };
    },
  };
}
