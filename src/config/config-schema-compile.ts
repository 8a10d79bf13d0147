/**
 * Compiling schema.ts `ConfigFile` with ajv: what the build does once to generate the standalone
 * validator (scripts/build-config-schema.mjs), and what runs instead where that output is absent.
 */
import { Ajv, type AnySchemaObject, type Options } from "ajv";
import type { ConfigSchema } from "./config-schema.js";
import { ConfigFile } from "./schema.js";

/** `allErrors`: report every problem at once; `verbose`: each error carries its data and schema. */
export const CONFIG_AJV_OPTIONS: Options = { allErrors: true, strict: true, verbose: true };

/** `ConfigFile` as plain JSON (TypeBox's symbol-keyed annotations dropped). */
export function configFileJsonSchema(): AnySchemaObject {
  return JSON.parse(JSON.stringify(ConfigFile)) as AnySchemaObject;
}

export function compileConfigSchema(): ConfigSchema {
  const schema = configFileJsonSchema();
  return { schema, validate: new Ajv(CONFIG_AJV_OPTIONS).compile(schema) };
}
