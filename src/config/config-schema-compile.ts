/**
 * Compiling schema.ts `ConfigFile` with ajv: what the build does once to generate the standalone
 * validators (scripts/build-config-schema.mjs), and what runs instead where that output is absent.
 */
import { Ajv, type AnySchemaObject, type Options } from "ajv";
import type { ConfigSchema, ConfigValidator } from "./config-schema.js";
import { ConfigFile } from "./schema.js";
import { shareSubschemas } from "./shared-subschemas.js";

/** `allErrors`: report every problem at once; `verbose`: each error carries its data and schema. */
export const CONFIG_AJV_OPTIONS: Options = { allErrors: true, strict: true, verbose: true };

/**
 * The quick verdict: stop at the first problem, no data or schema in it, no message text, and
 * each shared subschema or block a function of its own (`inlineRefs: false`). Same schema, same
 * verdict.
 */
export const CONFIG_CHECK_AJV_OPTIONS: Options = {
  allErrors: false,
  strict: true,
  verbose: false,
  messages: false,
  inlineRefs: false,
};

/** `ConfigFile` as plain JSON (TypeBox's symbol-keyed annotations dropped). */
export function configFileJsonSchema(): AnySchemaObject {
  return JSON.parse(JSON.stringify(ConfigFile)) as AnySchemaObject;
}

/** What `check` compiles: the schema with its repeated subschemas and blocks shared. */
export function configCheckSchema(schema: AnySchemaObject): AnySchemaObject {
  return shareSubschemas(schema);
}

export function compileConfigSchema(): ConfigSchema {
  const schema = configFileJsonSchema();
  return {
    schema,
    check: new Ajv(CONFIG_CHECK_AJV_OPTIONS).compile(configCheckSchema(schema)),
  };
}

export function compileConfigReport(): ConfigValidator {
  return new Ajv(CONFIG_AJV_OPTIONS).compile(configFileJsonSchema());
}
