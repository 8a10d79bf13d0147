/**
 * dist/config/config-schema.generated.js and config-schema-report.generated.js (written by the
 * build: ajv standalone code) must be the compiled schema's exact twins: same verdicts, the
 * detailed validator's errors the same field by field — so a start from dist reports the same
 * messages as these sources do — and built from the current schema.ts. The quick check (its
 * repeated subschemas and blocks shared, first error only) must give the detailed verdict.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { ConfigSchema, ConfigValidator } from "../../src/config/config-schema.js";
import {
  compileConfigReport,
  compileConfigSchema,
} from "../../src/config/config-schema-compile.js";
import { translateErrors } from "../../src/config/schema-errors.js";

const ROOT = resolve(import.meta.dirname, "../..");
const GENERATED = resolve(ROOT, "dist/config/config-schema.generated.js");
const GENERATED_REPORT = resolve(ROOT, "dist/config/config-schema-report.generated.js");

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
  // Inside the blocks and shared subschemas the quick check calls as functions of their own.
  "inside shared blocks": {
    admin: { host: "", port: 1 },
    limits: { headersTimeout: "5 s", maxHeaderSize: -1 },
    upstreams: [
      {
        ...up,
        tls: { caFile: "", extra: 1 },
        tokenTls: { serverName: 5 },
        headers: { "bad name": "x", ok: "line\nbreak" },
        rateLimit: { requests: 0, per: "1 minute", by: "everyone" },
        retry: { on: ["connect", "418"], budget: "10" },
        allow: [{ user: "a:b" }, { cidr: "10.0.0.0/8", user: "x" }, {}],
        token: { refreshWindow: [0.5, 2], acceptTokenTypes: [] },
      },
    ],
  },
  "valid, every block": {
    listen: { host: "127.0.0.1", port: 0 },
    admin: { port: 0 },
    limits: { headersTimeout: "5s", maxHeaderSize: "64KiB" },
    upstreams: [
      {
        ...up,
        tls: { caFile: "ca.pem" },
        headers: { "X-Team": "a" },
        rateLimit: { requests: 10, per: "1s", by: "caller" },
        retry: { on: ["connect", "503"], budget: "10%" },
        token: { refreshWindow: [0.5, 0.75], timeout: 2000 },
      },
    ],
  },
};

for (const file of readdirSync(resolve(ROOT, "config")).filter((f) => f.endsWith(".yaml"))) {
  DOCUMENTS[`config/${file}`] = parse(readFileSync(resolve(ROOT, "config", file), "utf8"));
}

describe("the generated config validators (dist)", () => {
  let generated: ConfigSchema;
  let generatedReport: ConfigValidator;
  let compiled: ConfigSchema;
  let compiledReport: ConfigValidator;

  beforeAll(async () => {
    for (const file of [GENERATED, GENERATED_REPORT]) {
      expect(existsSync(file), `${file} is missing: run \`npm run build\``).toBe(true);
    }
    generated = (await import(pathToFileURL(GENERATED).href)) as ConfigSchema;
    generatedReport = (
      (await import(pathToFileURL(GENERATED_REPORT).href)) as {
        validate: ConfigValidator;
      }
    ).validate;
    compiled = compileConfigSchema();
    compiledReport = compileConfigReport();
  });

  it("were generated from the current schema.ts (else: `npm run build`)", () => {
    expect(generated.schema).toEqual(compiled.schema);
  });

  it.each(Object.keys(DOCUMENTS))("%s: same verdicts, same errors, same messages", (name) => {
    const doc = DOCUMENTS[name];
    const verdict = compiledReport(doc);
    expect(generatedReport(doc)).toBe(verdict);
    expect(generated.check(doc)).toBe(verdict);
    expect(compiled.check(doc)).toBe(verdict);
    const errors = generatedReport.errors ?? [];
    expect(errors).toEqual(compiledReport.errors ?? []);
    expect(translateErrors(errors)).toEqual(translateErrors(compiledReport.errors ?? []));
  });

  it("the quick check shares the repeated subschemas and is the smaller module", () => {
    const quick = readFileSync(GENERATED, "utf8");
    const detailed = readFileSync(GENERATED_REPORT, "utf8");
    expect(quick).toContain('"$ref":"#/definitions/shared');
    expect(quick.length).toBeLessThan(detailed.length * 0.7);
  });
});
