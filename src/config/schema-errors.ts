/**
 * Validation against schema.ts `ConfigFile` with ajv, and the translation of ajv's errors into
 * messages a person can act on: what was expected and what was found, one issue per problem
 * (a TypeBox union's per-branch noise collapsed into one line).
 */
import type { ErrorObject } from "ajv";
import type { ConfigValidator } from "./config-schema.js";
import {
  describeValue,
  fromPointer,
  type IssueList,
  type IssuePath,
  type PathSegment,
} from "./issues.js";
import { didYouMean, suggest } from "./suggest.js";

/** Human wording for the schema's string patterns. */
const PATTERN_HINTS: Readonly<Record<string, string>> = {
  "^[\\x20-\\x7e\\t]*$": "printable ASCII text without line breaks",
  "^[A-Za-z0-9.-]+(:[0-9]{1,5})?$":
    'a host or host:port such as "api.example.com" or "localhost:8080"',
  "^[\\x21-\\x7e]+$": 'a version name without spaces, such as "default" or "scripting-preview"',
  "^/": 'a path starting with "/"',
  "^rediss?://": "a redis:// or rediss:// URL",
  "^https?://": "an http:// or https:// URL",
  "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$":
    'a name of lowercase letters, digits and "-" (at most 63, not starting or ending with "-")',
};

const TYPE_NAMES: Readonly<Record<string, string>> = {
  string: "a string",
  integer: "a whole number",
  number: "a number",
  boolean: "true or false",
  object: "a mapping",
  array: "a list",
  null: "nothing",
};

interface SchemaLike {
  type?: string;
  const?: unknown;
  description?: string;
  anyOf?: SchemaLike[];
  properties?: Record<string, SchemaLike>;
  items?: unknown;
}

/**
 * Validate `doc` with the file schema's validator (config-schema.ts; compiled with `verbose`, so
 * each error carries its data and parent schema); every problem goes to `issues`. Returns validity.
 */
export function validateSchema(
  doc: unknown,
  issues: IssueList,
  validateFile: ConfigValidator,
): boolean {
  if (validateFile(doc)) return true;
  for (const issue of translateErrors(validateFile.errors ?? []))
    issues.add(issue.path, issue.message);
  return false;
}

/** ajv errors → one `{path, message}` per problem. */
export function translateErrors(
  errors: readonly ErrorObject[],
): { path: IssuePath; message: string }[] {
  // A failed union reports each branch's failure and then `anyOf`: keep only the `anyOf` one.
  const unions = errors.filter((e) => e.keyword === "anyOf").map((e) => `${e.schemaPath}/`);
  const kept = errors.filter((e) => !unions.some((prefix) => e.schemaPath.startsWith(prefix)));
  const seen = new Set<string>();
  const out: { path: IssuePath; message: string }[] = [];
  for (const e of kept) {
    const issue = translate(e);
    const key = `${issue.path.join("\0")}\n${issue.message}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push(issue);
    }
  }
  return out;
}

function translate(e: ErrorObject): { path: IssuePath; message: string } {
  const path = fromPointer(e.instancePath);
  const parent = (e.parentSchema ?? {}) as SchemaLike & Record<string, unknown>;
  const found = describeValue(e.data, path);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case "required":
      return { path: [...path, String(p.missingProperty)], message: "required, but missing" };
    case "additionalProperties":
      return unknownKey(path, String(p.additionalProperty), parent);
    case "type":
      return { path, message: `expected ${typeName(String(p.type))}, found ${found}` };
    case "anyOf":
      return { path, message: describeUnion(parent, e.data, found) };
    case "const":
      return { path, message: `expected ${JSON.stringify(p.allowedValue)}, found ${found}` };
    case "pattern": {
      const pattern = String(p.pattern);
      const hint = PATTERN_HINTS[pattern] ?? parent.description ?? `a string matching /${pattern}/`;
      return { path, message: `expected ${hint}, found ${found}` };
    }
    case "minLength":
      return {
        path,
        message:
          p.limit === 1
            ? `expected a non-empty string, found ${found}`
            : `expected at least ${p.limit} characters, found ${found}`,
      };
    case "minimum":
      return { path, message: `expected at least ${p.limit}, found ${found}` };
    case "maximum":
      return { path, message: `expected at most ${p.limit}, found ${found}` };
    case "exclusiveMinimum":
      return { path, message: `expected more than ${p.limit}, found ${found}` };
    case "exclusiveMaximum":
      return { path, message: `expected less than ${p.limit}, found ${found}` };
    case "minItems":
    case "maxItems":
    case "additionalItems":
      return { path, message: describeItemCount(parent, e.data) };
    case "uniqueItems": {
      const items = Array.isArray(e.data) ? e.data : [];
      const j = Number(p.j);
      const i = Number(p.i);
      return {
        path,
        message: `expected no duplicates, found ${describeValue(items[i], [...path, i])} at positions ${Math.min(i, j)} and ${Math.max(i, j)}`,
      };
    }
    default:
      return { path, message: `${e.message ?? "is invalid"} (found ${found})` };
  }
}

function typeName(type: string): string {
  return TYPE_NAMES[type] ?? type;
}

function describeUnion(schema: SchemaLike, data: unknown, found: string): string {
  const branches = schema.anyOf ?? [];
  if (schema.description) return `expected ${schema.description}, found ${found}`;
  if (branches.length > 0 && branches.every((b) => b.const !== undefined)) {
    const values = branches.map((b) => String(b.const));
    const hint = typeof data === "string" ? didYouMean(data, values) : "";
    return `expected one of ${values.map((v) => JSON.stringify(v)).join(", ")}, found ${found}${hint}`;
  }
  const kinds = [...new Set(branches.map((b) => typeName(String(b.type))))];
  return `expected ${kinds.join(" or ")}, found ${found}`;
}

function describeItemCount(schema: SchemaLike & Record<string, unknown>, data: unknown): string {
  const count = Array.isArray(data) ? data.length : 0;
  const items = `${count} item${count === 1 ? "" : "s"}`;
  if (Array.isArray(schema.items)) {
    const n = schema.items.length;
    return `expected a list of exactly ${n} items (such as [0.75, 0.85]), found ${items}`;
  }
  if (typeof schema.minItems === "number" && count < schema.minItems) {
    return `expected at least ${schema.minItems} item${schema.minItems === 1 ? "" : "s"}, found ${count === 0 ? "none" : items}`;
  }
  return `expected at most ${String(schema.maxItems)} items, found ${items}`;
}

function unknownKey(
  path: IssuePath,
  key: string,
  schema: SchemaLike,
): { path: IssuePath; message: string } {
  const known = Object.keys(schema.properties ?? {});
  let hint = didYouMean(key, known);
  if (hint === "") {
    // The key may belong one level down (`prefetch` at the upstream level is `token.prefetch`).
    for (const [name, child] of Object.entries(schema.properties ?? {})) {
      for (const branch of child.anyOf ?? [child]) {
        const nested = Object.keys(branch.properties ?? {});
        const hit =
          nested.find((n) => n.toLowerCase() === key.toLowerCase()) ?? suggest(key, nested);
        if (hit !== undefined && hint === "") hint = ` (did you mean "${name}.${hit}"?)`;
      }
    }
  }
  const list = hint === "" && known.length <= 10 ? `; expected one of ${known.join(", ")}` : "";
  const at: PathSegment[] = [...path, key];
  return { path: at, message: `unknown key${hint}${list}` };
}
