/**
 * Schema-driven coercion of interpolated scalars: `port: ${PORT:-8080}` interpolates to the string
 * "8080", which becomes the integer 8080 because the schema wants an integer there. Only values
 * that were entirely one `${…}` are touched; a literal `port: "8080"` stays a type error.
 */
import type { IssuePath } from "./issues.js";
import { isObject } from "./issues.js";

/** The JSON Schema subset TypeBox emits for schema.ts. */
interface SchemaNode {
  type?: string;
  pattern?: string;
  const?: unknown;
  anyOf?: SchemaNode[];
  properties?: Record<string, SchemaNode>;
  patternProperties?: Record<string, SchemaNode>;
  items?: SchemaNode | SchemaNode[];
}

/** The schema alternatives that apply at `path` (unions flattened); empty when none does. */
export function schemasAt(root: unknown, path: IssuePath): SchemaNode[] {
  let nodes = flatten(root as SchemaNode);
  for (const segment of path) {
    const next: SchemaNode[] = [];
    for (const node of nodes) {
      const child = childSchema(node, segment);
      if (child) next.push(...flatten(child));
    }
    nodes = next;
  }
  return nodes;
}

function flatten(node: SchemaNode): SchemaNode[] {
  return node.anyOf ? node.anyOf.flatMap(flatten) : [node];
}

function childSchema(node: SchemaNode, segment: string | number): SchemaNode | undefined {
  if (typeof segment === "number") {
    return Array.isArray(node.items) ? node.items[segment] : node.items;
  }
  if (node.properties && Object.hasOwn(node.properties, segment)) return node.properties[segment];
  for (const [pattern, schema] of Object.entries(node.patternProperties ?? {})) {
    if (new RegExp(pattern, "u").test(segment)) return schema;
  }
  return undefined;
}

/**
 * The value a whole-reference string should take at a place the schema describes: unchanged when
 * a string is acceptable there, else a number or boolean when it reads as one.
 */
export function coerceScalar(value: string, schemas: readonly SchemaNode[]): unknown {
  const stringFits = schemas.some(
    (s) =>
      s.type === "string" &&
      (s.const === undefined || s.const === value) &&
      (s.pattern === undefined || new RegExp(s.pattern, "u").test(value)),
  );
  if (stringFits || schemas.length === 0) return value;
  const text = value.trim();
  for (const s of schemas) {
    if (s.type === "integer" && /^-?[0-9]+$/.test(text)) return Number(text);
    if (s.type === "number" && /^-?[0-9]+(\.[0-9]+)?$/.test(text)) return Number(text);
    if (s.type === "boolean" && /^(true|false)$/i.test(text)) return text.toLowerCase() === "true";
  }
  return value;
}

/** Coerce, in place, the values at `paths` of `doc` (which must be a fresh, mutable tree). */
export function coerceDocument(doc: unknown, paths: readonly IssuePath[], schema: unknown): void {
  for (const path of paths) {
    if (path.length === 0) continue;
    let parent: unknown = doc;
    for (const segment of path.slice(0, -1)) {
      parent =
        isObject(parent) || Array.isArray(parent)
          ? (parent as Record<string, unknown>)[segment]
          : undefined;
    }
    const key = path[path.length - 1]!;
    if (!(isObject(parent) || Array.isArray(parent))) continue;
    const container = parent as Record<string | number, unknown>;
    const value = container[key];
    if (typeof value === "string") container[key] = coerceScalar(value, schemasAt(schema, path));
  }
}
