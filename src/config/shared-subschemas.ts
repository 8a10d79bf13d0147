/**
 * The config schema as the start's quick validator compiles it (config-schema-compile.ts): each
 * subschema it repeats (a duration, a size, a non-empty string, the `tls` block…) and each block
 * (`listen`, `limits`, an upstream…) written once under `definitions` and used by `$ref`. ajv
 * inlines every use of an inline subschema, so the schema's ~40 durations became ~40 copies of
 * the same checks in one 215 KB function that V8 parses twice and compiles whole on a start;
 * with `inlineRefs: false` each definition is a small function of its own, compiled only when a
 * document has what it checks (bench/PROFILE.md, "The config validator at start"). Same schema,
 * same verdicts.
 */
import type { AnySchemaObject } from "ajv";

type Schema = AnySchemaObject;

/** Keywords whose value maps names to subschemas. */
const MAP_KEYWORDS = ["properties", "patternProperties"] as const;
/** Keywords whose value is a list of subschemas. */
const LIST_KEYWORDS = ["anyOf", "allOf", "oneOf"] as const;
/** Keywords whose value is one subschema (when it is an object, not a boolean). */
const ONE_KEYWORDS = ["additionalItems", "additionalProperties", "not"] as const;

/** Shared subschemas shorter than this (as JSON) stay inline: a call costs more than they do. */
const MIN_SHARED_JSON_LENGTH = 12;

/** A copy of `node` with each direct subschema replaced by `replace(subschema)`. */
function mapSubschemas(node: Schema, replace: (subschema: Schema) => Schema): Schema {
  const out: Schema = { ...node };
  for (const keyword of MAP_KEYWORDS) {
    const entries = node[keyword] as Record<string, Schema> | undefined;
    if (entries === undefined) continue;
    out[keyword] = Object.fromEntries(
      Object.entries(entries).map(([name, sub]) => [name, replace(sub)]),
    );
  }
  for (const keyword of LIST_KEYWORDS) {
    const list = node[keyword] as Schema[] | undefined;
    if (list !== undefined) out[keyword] = list.map(replace);
  }
  const items = node.items as Schema | Schema[] | undefined;
  if (items !== undefined) out.items = Array.isArray(items) ? items.map(replace) : replace(items);
  for (const keyword of ONE_KEYWORDS) {
    const sub = node[keyword] as unknown;
    if (typeof sub === "object" && sub !== null) out[keyword] = replace(sub as Schema);
  }
  return out;
}

/**
 * A mapping with properties of its own (`listen`, `limits`, an upstream, its `token`): a
 * function of its own even when used once, so a start compiles only the blocks its document has.
 */
function isBlock(node: Schema): boolean {
  return node.type === "object" && node.properties !== undefined;
}

/** `schema` (without `$ref`s of its own) with its repeated subschemas and blocks in `definitions`. */
export function shareSubschemas(schema: Schema): Schema {
  const seen = new Map<string, { node: Schema; uses: number }>();
  const count = (node: Schema): Schema => {
    const key = JSON.stringify(node);
    if (key.length >= MIN_SHARED_JSON_LENGTH) {
      const entry = seen.get(key);
      if (entry === undefined) seen.set(key, { node, uses: 1 });
      else entry.uses++;
    }
    mapSubschemas(node, count);
    return node;
  };
  mapSubschemas(schema, count);

  const names = new Map<string, string>();
  for (const [key, { node, uses }] of seen) {
    if (uses > 1 || isBlock(node)) names.set(key, `shared${names.size}`);
  }
  const definitions: Record<string, Schema> = {};
  const share = (node: Schema): Schema => {
    const name = names.get(JSON.stringify(node));
    if (name === undefined) return mapSubschemas(node, share);
    definitions[name] ??= mapSubschemas(node, share);
    return { $ref: `#/definitions/${name}` };
  };
  return { ...mapSubschemas(schema, share), definitions };
}
