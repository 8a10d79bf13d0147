/**
 * Issue #25: with tracing off, no OpenTelemetry module is loaded at all (a sidecar's memory and
 * start time must not move). Checked in a fresh Node process — the test runner's own module
 * graph can't tell — that imports tracing.ts (transpiled as is) with a module hook recording
 * every module resolved, and lists the CommonJS module cache too. The same harness with
 * tracing on must see the SDK, so the check can't pass by seeing nothing.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, "../..");
const SOURCES = ["tracing.ts", "tracing-settings.ts", "tracing-sdk.ts", "tracing-provider.ts"];

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

// A request's walk through the API, then the loaded modules.
const MAIN = `
import { createRequire } from "node:module";
import { createTracing } from "./observability/tracing.js";
const logger = { child() { return logger; }, info() {}, warn() {}, error() {}, debug() {} };
const tracing = await createTracing({ env: JSON.parse(process.env.TRACING_ENV), logger });
const server = tracing.startServerSpan({ headers: {}, method: "GET", httpVersion: "1.1" });
const attempt = server.startClientSpan("GET", "https://api.example", "/", "u");
const traceparent = attempt.traceparent();
attempt.end(200);
server.end(200);
await tracing.shutdown();
const cjs = Object.keys(createRequire(import.meta.url).cache);
console.log(JSON.stringify({ enabled: tracing.enabled, traceparent: traceparent ?? null, cjs }));
`;

describe("tracing off loads no OpenTelemetry module", () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "bp-tracing-load-"));
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
    writeFileSync(join(dir, "package.json"), '{ "type": "module" }');
    mkdirSync(join(dir, "observability"));
    for (const file of SOURCES) {
      const source = readFileSync(join(ROOT, "src/observability", file), "utf8");
      const { outputText } = ts.transpileModule(source, {
        compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
        fileName: file,
      });
      writeFileSync(join(dir, "observability", file.replace(/\.ts$/, ".js")), outputText);
    }
    writeFileSync(join(dir, "hooks.mjs"), HOOKS);
    writeFileSync(join(dir, "register.mjs"), REGISTER);
    writeFileSync(join(dir, "main.mjs"), MAIN);
  });
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function loadedWith(env: Record<string, string>) {
    const log = join(dir, `resolved-${Math.random().toString(36).slice(2)}.log`);
    writeFileSync(log, "");
    const { stdout } = await run(process.execPath, ["--import", "./register.mjs", "main.mjs"], {
      cwd: dir,
      env: { PATH: process.env.PATH, RESOLVED_LOG: log, TRACING_ENV: JSON.stringify(env) },
      timeout: 20_000,
    });
    const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
      enabled: boolean;
      traceparent: string | null;
      cjs: string[];
    };
    const resolved = readFileSync(log, "utf8").split("\n").filter(Boolean);
    const otel = (list: string[]) => list.filter((entry) => entry.includes("@opentelemetry"));
    return { ...result, resolved, otelResolved: otel(resolved), otelCjs: otel(result.cjs) };
  }

  it("off: nothing from @opentelemetry is resolved or required", async () => {
    const off = await loadedWith({});
    expect(off.enabled).toBe(false);
    expect(off.traceparent).toBeNull();
    // The harness works: it saw our own module.
    expect(off.resolved.some((url) => url.endsWith("/observability/tracing.js"))).toBe(true);
    expect(off.resolved.filter((url) => /\/tracing-(sdk|provider)\.js$/.test(url))).toEqual([]);
    expect(off.otelResolved).toEqual([]);
    expect(off.otelCjs).toEqual([]);
  });

  it("on (control): the same harness sees the SDK", async () => {
    const on = await loadedWith({
      OTEL_TRACES_EXPORTER: "otlp",
      OTEL_TRACES_SAMPLER: "always_off",
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9",
    });
    expect(on.enabled).toBe(true);
    expect(on.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/);
    expect(on.otelResolved.some((url) => url.includes("@opentelemetry/sdk-trace-base"))).toBe(true);
    expect(on.otelCjs.some((path) => path.includes("@opentelemetry/api"))).toBe(true);
  });
});
