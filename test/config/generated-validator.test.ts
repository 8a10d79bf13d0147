/**
 * dist/config/config-schema.generated.js (written by the build: ajv standalone code) must be the
 * compiled schema's exact twin: same verdicts, same errors field by field — so a start from
 * dist reports the same messages as these sources do — and built from the current schema.ts.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { ConfigSchema } from "../../src/config/config-schema.js";
import { compileConfigSchema } from "../../src/config/config-schema-compile.js";
import { translateErrors } from "../../src/config/schema-errors.js";

const ROOT = resolve(import.meta.dirname, "../..");
const GENERATED = resolve(ROOT, "dist/config/config-schema.generated.js");

const up = { name: "api", baseUrl: "https://api.example.com", clientId: "c", clientSecret: "s" };
const DOCUMENTS: Record<string, unknown> = {
  empty: {},
  "not a mapping": [1, 2],
  "minimal valid": { upstreams: [up] },
  "unknown keys, near misses": { lissten: { port: 1 }, upstreams: [{ ...up, prefetch: true }] },
  "wrong types": { listen: { host: 5, port: "x" }, upstreams: [{ ...up, clientId: 7 }] },
  "out of range": { listen: { port: 70000 }, admin: { port: -1 }, upstreams: [up] },
  "bad duration and size": {
    limits: { maxRequestBody: "1 GB" },
    upstreams: [{ ...up, token: { timeout: "5 sec" }, timeouts: { connect: -5 } }],
  },
  "bad enum": { log: { level: "verbose", format: "xml" }, upstreams: [up] },
  "bad patterns": { upstreams: [{ ...up, name: "Not_Valid", baseUrl: "ftp://x" }] },
  "empty strings and lists": { upstreams: [] },
  "duplicates and nested": {
    upstreams: [
      { ...up, match: { hosts: ["a.example.com", "a.example.com"], pathPrefix: "x" } },
      { ...up, name: "b", token: { refreshAt: [0.5] } },
    ],
  },
};

for (const file of readdirSync(resolve(ROOT, "config")).filter((f) => f.endsWith(".yaml"))) {
  DOCUMENTS[`config/${file}`] = parse(readFileSync(resolve(ROOT, "config", file), "utf8"));
}

describe("the generated config validator (dist)", () => {
  let generated: ConfigSchema;
  let compiled: ConfigSchema;

  beforeAll(async () => {
    expect(existsSync(GENERATED), `${GENERATED} is missing: run \`npm run build\``).toBe(true);
    generated = (await import(pathToFileURL(GENERATED).href)) as ConfigSchema;
    compiled = compileConfigSchema();
  });

  it("was generated from the current schema.ts (else: `npm run build`)", () => {
    expect(generated.schema).toEqual(compiled.schema);
  });

  it.each(Object.keys(DOCUMENTS))("%s: same verdict, same errors, same messages", (name) => {
    const doc = DOCUMENTS[name];
    const verdict = generated.validate(doc);
    expect(verdict).toBe(compiled.validate(doc));
    const errors = generated.validate.errors ?? [];
    expect(errors).toEqual(compiled.validate.errors ?? []);
    expect(translateErrors(errors)).toEqual(translateErrors(compiled.validate.errors ?? []));
  });
});
