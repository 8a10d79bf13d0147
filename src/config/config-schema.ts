/**
 * The config file's JSON schema and its two validators, as the loader uses them at run time. The
 * build (scripts/build-config-schema.mjs) writes them as ajv's standalone code for schema.ts
 * `ConfigFile`, so a start neither loads TypeBox and ajv's compiler nor compiles the schema
 * (≈ 230 modules, ~3 MiB of heap and a large share of the CPU of a start: bench/PROFILE.md,
 * "Footprint"):
 * - dist/config/config-schema.generated.js: the schema and `check`, the quick verdict every start
 *   runs (first error only, no detail, repeated subschemas and blocks shared: shared-subschemas.ts);
 * - dist/config/config-schema-report.generated.js: `validate`, every error with its data and
 *   schema, for the messages — loaded only when `check` says no.
 * Where those files are absent (the sources under vitest, before a build) the same schema is
 * compiled with the same options instead, so both paths give identical verdicts and errors.
 */
import { existsSync } from "node:fs";
import type { ErrorObject } from "ajv";

/** An ajv validate function (standalone or compiled): `errors` holds the last run's problems. */
export interface ConfigValidator {
  (doc: unknown): boolean;
  errors?: ErrorObject[] | null;
}

export interface ConfigSchema {
  /** `ConfigFile` as plain JSON schema (coercion and the error wording read it). */
  schema: unknown;
  /** True when the document is valid; says nothing about why not (see `loadConfigReport`). */
  check: ConfigValidator;
}

const GENERATED = new URL("./config-schema.generated.js", import.meta.url);
const GENERATED_REPORT = new URL("./config-schema-report.generated.js", import.meta.url);
let loading: Promise<ConfigSchema> | undefined;
let loadingReport: Promise<ConfigValidator> | undefined;

/** The schema and its quick validator, loaded once per process. */
export function loadConfigSchema(): Promise<ConfigSchema> {
  loading ??= existsSync(GENERATED)
    ? (import(GENERATED.href) as Promise<ConfigSchema>)
    : import("./config-schema-compile.js").then((m) => m.compileConfigSchema());
  return loading;
}

/** The validator that reports every problem with its data and schema, loaded once per process. */
export function loadConfigReport(): Promise<ConfigValidator> {
  loadingReport ??= existsSync(GENERATED_REPORT)
    ? (import(GENERATED_REPORT.href) as Promise<{ validate: ConfigValidator }>).then(
        (m) => m.validate,
      )
    : import("./config-schema-compile.js").then((m) => m.compileConfigReport());
  return loadingReport;
}
