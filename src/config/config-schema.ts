/**
 * The config file's JSON schema and its validator, as the loader uses them at run time. The
 * build (scripts/build-config-schema.mjs) writes both into dist/config/config-schema.generated.js
 * — ajv's standalone code for schema.ts `ConfigFile` — so a start neither loads TypeBox and ajv's
 * compiler nor compiles the schema (≈ 230 modules, ~3 MiB of heap and a large share of the CPU
 * of a start: bench/PROFILE.md, "Footprint"). Where that file is absent (the sources under
 * vitest, before a build) the same schema is compiled with the same options instead, so both
 * paths report identical errors.
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
  validate: ConfigValidator;
}

const GENERATED = new URL("./config-schema.generated.js", import.meta.url);
let loading: Promise<ConfigSchema> | undefined;

/** The schema and its validator, loaded once per process. */
export function loadConfigSchema(): Promise<ConfigSchema> {
  loading ??= existsSync(GENERATED)
    ? (import(GENERATED.href) as Promise<ConfigSchema>)
    : import("./config-schema-compile.js").then((m) => m.compileConfigSchema());
  return loading;
}
