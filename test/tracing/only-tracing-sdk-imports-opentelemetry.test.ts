/**
 * STYLE "Tracing at the edges": no file but observability/tracing-sdk.ts and the provider and
 * spans it builds on import OpenTelemetry (a type-only import is free and allowed), and tracing.ts
 * reaches them only through `import()`, so turning tracing off keeps it out of the process.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { expect, it } from "vitest";

const SRC = resolve(import.meta.dirname, "../../src");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(join(dir, entry.name))
      : entry.name.endsWith(".ts")
        ? [join(dir, entry.name)]
        : [],
  );
}

/** `import … from "@opentelemetry/…"` (not `import type`), `export … from`, `import("@opentelemetry/…")`, `require(…)`. */
const VALUE_IMPORT =
  /(?:^|\n)\s*(?:import(?!\s+type\b)[^;]*?from|export[^;]*?from)\s*["']@opentelemetry\/|(?:import|require)\s*\(\s*["']@opentelemetry\//;

const LAZY = [
  "observability/tracing-provider.ts",
  "observability/tracing-sdk.ts",
  "observability/tracing-span.ts",
];

it("only the lazily loaded tracing files load @opentelemetry", () => {
  const files = sources(SRC);
  const importers = files
    .filter((file) => VALUE_IMPORT.test(readFileSync(file, "utf8")))
    .map((file) => relative(SRC, file))
    .sort();
  expect(importers).toEqual(LAZY);
  // …and nothing imports those statically.
  const staticImport =
    /(?:import(?!\s+type\b)|export)[^;]*?from\s*["'][^"']*tracing-(?:sdk|provider|span)\.js["']/;
  const staticImporters = files
    .filter((file) => staticImport.test(readFileSync(file, "utf8")))
    .map((file) => relative(SRC, file));
  expect(staticImporters).toEqual(["observability/tracing-sdk.ts"]);
});
