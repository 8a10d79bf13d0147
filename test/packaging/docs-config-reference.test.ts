/**
 * Issue 32: the configuration reference (docs/configuration.md, moved out of the README) names
 * every key of the config schema in a table row with its default, an example and what it does,
 * and every example is a valid config: written from the top of the file, or, for `upstreams[]`
 * keys, as it goes inside one upstream, and about the key of its row.
 */
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { ConfigFile } from "../../src/config/schema.js";
import { readPage } from "./docs-tools.js";
import { formatErrors, substituteEnv, type Values, validateConfigFile } from "./schema-tools.js";

interface Row {
  keys: string[];
  defaultValue: string;
  example: string;
  meaning: string;
  line: number;
}

const BASE_UPSTREAM = {
  name: "api",
  baseUrl: "https://api.example.com",
  clientId: "id",
  clientSecret: "secret",
};

/** Cells of a table row, split on `|` outside code spans. */
function cells(line: string): string[] {
  const out: string[] = [];
  let cell = "";
  let inCode = false;
  for (const ch of line.trim().replace(/^\||\|$/g, "")) {
    if (ch === "`") inCode = !inCode;
    if (ch === "|" && !inCode) {
      out.push(cell.trim());
      cell = "";
    } else cell += ch;
  }
  out.push(cell.trim());
  return out;
}

/**
 * The keys a key cell names: the first code span is a full path; each later one that is a single
 * name (`.port`, `clientIdFile`) is its sibling. Parenthesised names list members of a list item
 * (`upstreams[].allow` (`cidr`, `user`)).
 */
function keysOf(cell: string): string[] {
  const spans = [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
  const [first = "", ...rest] = spans;
  const keys = [first];
  const parent = first.slice(0, first.lastIndexOf(".") + 1);
  const member = /\(([^)]*)\)\s*$/.exec(cell.replace(/\(\+/, "+"))?.[1];
  for (const span of rest) {
    const name = span.replace(/^\./, "");
    if (member?.includes(`\`${span}\``)) keys.push(`${first}[].${name}`);
    else if (!name.includes(".")) keys.push(`${parent}${name}`);
  }
  return keys;
}

/** The reference's rows: tables whose header is `key | default | example | meaning`. */
function referenceRows(markdown: string): Row[] {
  const rows: Row[] = [];
  let inTable = false;
  markdown.split("\n").forEach((line, index) => {
    if (/^\| key \| default \| example \| meaning \|$/.test(line)) inTable = true;
    else if (!line.startsWith("|")) inTable = false;
    else if (inTable && !line.startsWith("|---")) {
      const [key = "", defaultValue = "", example = "", meaning = ""] = cells(line);
      rows.push({ keys: keysOf(key), defaultValue, example, meaning, line: index + 1 });
    }
  });
  return rows;
}

/** Leaf paths of the schema (`limits.maxWaiting`, `upstreams[].rateLimit.per`, …). */
function schemaKeys(schema: unknown, prefix = ""): string[] {
  const node = schema as {
    anyOf?: unknown[];
    type?: string;
    properties?: Record<string, unknown>;
    items?: { type?: string };
  };
  if (node.anyOf) return [...new Set(node.anyOf.flatMap((s) => schemaKeys(s, prefix)))];
  if (node.type === "object" && node.properties && Object.keys(node.properties).length > 0) {
    return Object.entries(node.properties).flatMap(([key, value]) =>
      schemaKeys(value, prefix ? `${prefix}.${key}` : key),
    );
  }
  if (node.type === "array" && node.items?.type === "object")
    return schemaKeys(node.items, `${prefix}[]`);
  return [prefix];
}

/** Whether a parsed example sets a key path (`upstreams[].` stripped for upstream examples). */
function sets(value: unknown, path: string): boolean {
  const [head = "", ...rest] = path.split(".");
  const name = head.replace(/\[\]$/, "");
  if (value === null || typeof value !== "object") return false;
  const child = (value as Values)[name];
  if (child === undefined) return false;
  if (rest.length === 0) return true;
  const items = head.endsWith("[]") && Array.isArray(child) ? child : [child];
  return items.some((item) => sets(item, rest.join(".")));
}

/** The config an example stands for, and the object and key path its row is about. */
function exampleConfig(row: Row): { config: Values; scope: Values; key: string } {
  const example = parse(row.example.replace(/^`|`$/g, "")) as Values;
  const key = row.keys[0]!;
  if (!key.startsWith("upstreams[].")) {
    return { config: { upstreams: [BASE_UPSTREAM], ...example }, scope: example, key };
  }
  const upstream = { ...BASE_UPSTREAM, ...example };
  return {
    config: { upstreams: [upstream] },
    scope: example,
    key: key.slice("upstreams[].".length),
  };
}

const page = readPage("docs/configuration.md");
const rows = referenceRows(page.text);

describe("the reference checks themselves", () => {
  it("read the key cells' shorthands", () => {
    expect(keysOf("`listen.host` / `.port`")).toEqual(["listen.host", "listen.port"]);
    expect(keysOf("`upstreams[].clientId` / `clientIdFile`")).toEqual([
      "upstreams[].clientId",
      "upstreams[].clientIdFile",
    ]);
    expect(keysOf("`callers.kubernetes.jwksFile` / `.jwksUri` (+ `.caFile`)")).toEqual([
      "callers.kubernetes.jwksFile",
      "callers.kubernetes.jwksUri",
      "callers.kubernetes.caFile",
    ]);
    expect(keysOf("`upstreams[].allow` (`cidr`, `user`)")).toEqual([
      "upstreams[].allow",
      "upstreams[].allow[].cidr",
      "upstreams[].allow[].user",
    ]);
  });

  it("find an example that is invalid or about another key", () => {
    expect(schemaKeys({ type: "object", properties: { a: { type: "string" } } })).toEqual(["a"]);
    const bad: Row = {
      keys: ["upstreams[].retry.on"],
      defaultValue: "",
      example: "`retry: { on: [503] }`",
      meaning: "",
      line: 1,
    };
    expect(validateConfigFile(exampleConfig(bad).config)).not.toEqual([]);
    const elsewhere = exampleConfig({ ...bad, example: "`timeouts: { connect: 1s }`" });
    expect(sets(elsewhere.scope, elsewhere.key)).toBe(false);
    const here = exampleConfig({ ...bad, example: '`retry: { on: [connect, "503"] }`' });
    expect(validateConfigFile(here.config)).toEqual([]);
    expect(sets(here.scope, here.key)).toBe(true);
  });
});

describe("docs/configuration.md", () => {
  it("has a row for every key of the config schema", () => {
    const documented = new Set(rows.flatMap((r) => r.keys));
    const keys = schemaKeys(JSON.parse(JSON.stringify(ConfigFile)));
    expect(keys.length).toBeGreaterThan(100);
    expect(keys.filter((k) => !documented.has(k))).toEqual([]);
  });

  it("names only keys the schema has", () => {
    const keys = new Set(schemaKeys(JSON.parse(JSON.stringify(ConfigFile))));
    // Object keys too (`upstreams[].dpop`, `upstreams[].allow`): the parents of the leaves.
    const objects = new Set(
      [...keys].flatMap((k) =>
        k.split(".").map((_, i, all) => all.slice(0, i).join(".").replace(/\[\]$/, "")),
      ),
    );
    const unknown = rows.flatMap((r) => r.keys).filter((k) => !keys.has(k) && !objects.has(k));
    expect(unknown).toEqual([]);
  });

  it("gives every row a default, an example and a meaning", () => {
    const incomplete = rows.filter((r) => !r.defaultValue || !r.example || !r.meaning);
    expect(incomplete.map((r) => `line ${r.line}`)).toEqual([]);
  });

  it("has only examples that are valid and set a key of their row", () => {
    const problems: string[] = [];
    for (const row of rows) {
      const { config, scope, key } = exampleConfig(row);
      const errors = validateConfigFile(substituteEnv(config));
      if (errors.length > 0) problems.push(`line ${row.line}: ${formatErrors(errors)}`);
      const relative = (k: string) => k.slice(row.keys[0]!.length - key.length);
      if (!row.keys.some((k) => sets(scope, relative(k))))
        problems.push(`line ${row.line}: the example ${row.example} sets none of ${row.keys}`);
    }
    expect(problems).toEqual([]);
  });
});
