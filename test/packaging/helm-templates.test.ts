/**
 * The chart's templates, reviewed without a `helm` binary: balanced delimiters and blocks, every
 * named template that is used is defined, every `.Values` path exists in values.yaml, and
 * `mode: sidecar` renders no resources.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CHART_DIR, type Values } from "./schema-tools.js";
import {
  definedTemplates,
  referencedTemplates,
  referencedValuePaths,
  scanTemplate,
} from "./template-scan.js";

const TEMPLATES_DIR = join(CHART_DIR, "templates");
const templateFiles = readdirSync(TEMPLATES_DIR).sort();
const scans = new Map(
  templateFiles.map((f) => [f, scanTemplate(readFileSync(join(TEMPLATES_DIR, f), "utf8"))]),
);
const allActions = [...scans.values()].flatMap((s) => s.actions);
const values = parse(readFileSync(join(CHART_DIR, "values.yaml"), "utf8")) as Values;
const chart = parse(readFileSync(join(CHART_DIR, "Chart.yaml"), "utf8")) as Values;

function hasValuePath(path: string): boolean {
  let node: unknown = values;
  for (const key of path.split(".")) {
    if (node === null || typeof node !== "object" || !(key in node)) return false;
    node = (node as Values)[key];
  }
  return true;
}

describe("the template scanner", () => {
  it("accepts balanced blocks and braces inside string literals", () => {
    const scan = scanTemplate(
      "{{- if .Values.a }}\n{{ `{{ $labels.x }}` | quote }}\n{{- else }}{{/* c {{ */}}{{ end }}",
    );
    expect(scan.problems).toEqual([]);
    expect(scan.actions.map((a) => a.body)).toEqual([
      "if .Values.a",
      "`{{ $labels.x }}` | quote",
      "else",
      "end",
    ]);
  });

  it.each([
    ["an unclosed block", "{{ if .Values.a }}x", /never closed/],
    ["a stray end", "x{{ end }}", /without an open block/],
    ["a stray }}", "a: }}", /without "\{\{"/],
    ["an unclosed action", "{{ .Values.a ", /without "}}"/],
    ["an unclosed comment", "{{/* x ", /unterminated comment/],
    [".Values inside range", "{{ range .Values.l }}{{ .Values.x }}{{ end }}", /use \$\.Values/],
  ])("reports %s", (_name, source, problem) => {
    expect(scanTemplate(source).problems.join("\n")).toMatch(problem);
  });

  it("allows $.Values inside range and .Values in a with's else branch", () => {
    const source =
      "{{ range .Values.l }}{{ $.Values.x }}{{ end }}{{ with .Values.a }}{{ else }}{{ .Values.b }}{{ end }}";
    expect(scanTemplate(source).problems).toEqual([]);
  });

  it("extracts names and value paths", () => {
    const { actions } = scanTemplate(
      '{{ define "n.a" }}{{ include "n.b" (dict "k" .Values.x.y) }}{{ template "n.c" $.Values.z }}{{ end }}{{ ".Values.not" }}',
    );
    expect(definedTemplates(actions)).toEqual(["n.a"]);
    expect(referencedTemplates(actions)).toEqual(["n.b", "n.c"]);
    expect(referencedValuePaths(actions)).toEqual(["x.y", "z"]);
  });
});

describe("chart templates", () => {
  it.each(templateFiles)("%s has balanced delimiters and blocks", (file) => {
    expect(scans.get(file)?.problems).toEqual([]);
  });

  it("defines every named template it includes, in _*.tpl files, once", () => {
    const defined = templateFiles
      .filter((f) => f.startsWith("_") && f.endsWith(".tpl"))
      .flatMap((f) => definedTemplates(scans.get(f)?.actions ?? []));
    expect(new Set(defined).size).toBe(defined.length);
    const missing = [...new Set(referencedTemplates(allActions))].filter(
      (n) => !defined.includes(n),
    );
    expect(missing).toEqual([]);
    expect(defined.every((n) => n.startsWith("bearer-proxy."))).toBe(true);
    expect(defined).toEqual(
      expect.arrayContaining(["bearer-proxy.sidecar", "bearer-proxy.sidecarVolumes"]),
    );
  });

  it("refers only to .Values paths that exist in values.yaml", () => {
    const paths = [...new Set(referencedValuePaths(allActions))];
    expect(paths.length).toBeGreaterThan(50);
    expect(paths.filter((p) => !hasValuePath(p))).toEqual([]);
  });

  it("renders resources only in gateway mode (sidecar mode deploys nothing)", () => {
    const resources = templateFiles.filter(
      (f) => f.endsWith(".yaml") && f !== "extra-objects.yaml",
    );
    expect(resources.length).toBeGreaterThanOrEqual(10);
    for (const file of resources) {
      expect(scans.get(file)?.actions[0]?.body, file).toMatch(
        /^if (and )?\(?eq \.Values\.mode "gateway"\)?/,
      );
    }
  });

  it("is a v2 chart whose appVersion is the package version and the sidecar's default tag", () => {
    const pkg = JSON.parse(readFileSync(join(CHART_DIR, "..", "..", "package.json"), "utf8")) as {
      version: string;
    };
    expect(chart.apiVersion).toBe("v2");
    expect(chart.appVersion).toBe(pkg.version);
    const sidecar = readFileSync(join(TEMPLATES_DIR, "_sidecar.tpl"), "utf8");
    const image = (values.image as Values).repository as string;
    expect(sidecar).toContain(`"${image}:${pkg.version}"`);
  });

  it("derives terminationGracePeriodSeconds from every shutdown value", () => {
    const helpers = readFileSync(join(TEMPLATES_DIR, "_helpers.tpl"), "utf8");
    for (const key of Object.keys(values.shutdown as Values)) {
      expect(helpers).toContain(`$s.${key}`);
    }
  });
});

describe("chart README", () => {
  const readme = readFileSync(join(CHART_DIR, "README.md"), "utf8");
  const schema = JSON.parse(readFileSync(join(CHART_DIR, "values.schema.json"), "utf8")) as Values;
  const definitions = schema.definitions as Record<string, Values>;

  /** Value paths to document: leaves, and objects the schema leaves free-form (or `config`). */
  function documentedPaths(node: unknown, nodeSchema: Values, prefix: string): string[] {
    const resolved =
      typeof nodeSchema.$ref === "string"
        ? (definitions[nodeSchema.$ref.split("/").pop()!] ?? {})
        : nodeSchema;
    const properties = resolved.properties as Record<string, Values> | undefined;
    if (
      prefix === "config" ||
      node === null ||
      typeof node !== "object" ||
      Array.isArray(node) ||
      !properties
    )
      return [prefix];
    return Object.entries(node).flatMap(([key, child]) =>
      documentedPaths(child, properties[key] ?? {}, prefix ? `${prefix}.${key}` : key),
    );
  }

  it("has a table row for every value", () => {
    const paths = documentedPaths(values, schema, "");
    expect(paths.length).toBeGreaterThan(100);
    const missing = paths.filter((p) => !readme.includes(`| \`${p}\` |`));
    expect(missing).toEqual([]);
  });
});
