/**
 * Issue #25: with tracing off, no OpenTelemetry module is loaded at all (a sidecar's memory and
 * start time must not move). Checked in a fresh Node process — the test runner's own module
 * graph can't tell — that imports tracing.ts (transpiled as is) with a module hook recording
 * every module resolved, and lists the CommonJS module cache too. The same harness with
 * tracing on must see the SDK, so the check can't pass by seeing nothing.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT, useFreshProcess } from "../helpers/fresh-process-modules.js";

// The tracing room and what it imports from the rest of src/.
const SOURCES = [
  "observability/tracing.ts",
  "observability/tracing-settings.ts",
  "observability/tracing-sdk.ts",
  "observability/tracing-provider.ts",
  "observability/tracing-span.ts",
  "observability/otlp-trace-encoder.ts",
  "observability/tracing-ids.ts",
  "observability/log-throttle.ts",
  "errors.ts",
  "base/loggable-url.ts",
];

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
  const fresh = useFreshProcess({
    prefix: "bp-tracing-load-",
    sources: () => SOURCES.map((file) => [join(ROOT, "src", file), file.replace(/\.ts$/, ".js")]),
    main: MAIN,
  });

  async function loadedWith(env: Record<string, string>) {
    const { result, resolved } = await fresh.run<{
      enabled: boolean;
      traceparent: string | null;
      cjs: string[];
    }>({ TRACING_ENV: JSON.stringify(env) });
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
