/**
 * The documentation stays true to the code, on every page a user reads (README.md and docs/):
 * every bearer-proxy config snippet (a ```yaml block whose first line is `# bearer-proxy config`,
 * or such a `config.yaml` in a ConfigMap) passes the config schema and the loader
 * `bearer-proxy validate` uses; every Helm values snippet (`# helm values`) passes the chart's
 * values.schema.json; copies of the chart's examples (`# examples/<file>`) match them line for
 * line; and the environment variables, commands and flags the pages mention exist. Each guide
 * has runnable examples, a config snippet and a "try it locally" block (run by
 * docs-try-it.test.ts).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { COMMANDS } from "../../src/commands/command-specs.js";
import { KNOWN_ENV_VARS } from "../../src/config/env-overrides.js";
import { type CodeBlock, codeBlocks, GUIDES, prose, readPage, userPages } from "./docs-tools.js";
import {
  CHART_DIR,
  formatErrors,
  mergeValues,
  REPO_ROOT,
  renderChartConfig,
  substituteEnv,
  type Values,
  validateConfigFile,
  validateValues,
  validateWithLoader,
} from "./schema-tools.js";

const CONFIG_MARKER = "# bearer-proxy config";
const VALUES_MARKER = "# helm values";

/** bearer-proxy config texts: marked yaml blocks, and marked `config.yaml` in ConfigMaps. */
function configSnippets(blocks: readonly CodeBlock[]): CodeBlock[] {
  const out: CodeBlock[] = [];
  for (const block of blocks.filter((b) => b.lang === "yaml")) {
    if (block.text.startsWith(`${CONFIG_MARKER}\n`)) out.push(block);
    else if (/^kind: ConfigMap$/m.test(block.text)) {
      for (const doc of parseAllDocuments(block.text)) {
        const data = (doc.toJS() as { data?: Record<string, string> } | null)?.data ?? {};
        const text = data["config.yaml"];
        if (text?.startsWith(`${CONFIG_MARKER}\n`)) out.push({ ...block, text });
      }
    }
  }
  return out;
}

/** Problems of one config snippet: the schema (after `${VAR}` substitution), then the loader. */
async function checkConfigSnippet(text: string): Promise<string[]> {
  const schemaErrors = validateConfigFile(substituteEnv(parse(text)));
  if (schemaErrors.length > 0) return [formatErrors(schemaErrors)];
  return validateWithLoader(text);
}

/**
 * Unknown commands and flags in one line of shell: every `bearer-proxy <command> --flag`, also
 * as `npx bearer-proxy …` and as the image's entry point (`bearer-proxy:0.1.0 validate …`).
 */
function commandProblems(line: string): string[] {
  const problems: string[] = [];
  for (const m of line.matchAll(/\bbearer-proxy(?::[\w.-]+)?\s+([^|;&#)`\n]*)/g)) {
    const [command = "", ...rest] = (m[1] ?? "").trim().split(/\s+/);
    if (command === "--version" || command === "--help") continue;
    if (!/^[a-z]+$/.test(command)) continue; // a name or path, not a command
    if (!(command in COMMANDS)) {
      problems.push(`unknown command "${command}" in: ${line.trim()}`);
      continue;
    }
    const options = COMMANDS[command as keyof typeof COMMANDS].options.map((o) => o.name);
    for (const flag of rest.filter((t) => t.startsWith("--"))) {
      const flagName = flag.slice(2).split("=")[0]!;
      if (!options.includes(flagName) && flagName !== "help")
        problems.push(`unknown flag --${flagName} for ${command} in: ${line.trim()}`);
    }
  }
  return problems;
}

/** The test setup's own variables (BEARER_PROXY_TEST_*) are documented for developers. */
const vitestConfig = readFileSync(join(REPO_ROOT, "vitest.config.ts"), "utf8");
const defaults = parse(readFileSync(join(CHART_DIR, "values.yaml"), "utf8")) as Values;

describe("the snippet checks themselves", () => {
  const markdown = `\`\`\`yaml
${CONFIG_MARKER}
upstreams:
  - name: api
    baseUrl: https://api.example.com
    clientSecretFIle: /x
\`\`\`

\`\`\`yaml
${CONFIG_MARKER}
upstreams:
  - name: api
    baseUrl: \${BASE_URL:-https://api.example.com}
    clientId: \${CLIENT_ID}
    clientSecret: \${CLIENT_SECRET}
    token:
      timeout: \${TOKEN_TIMEOUT:-10s}
\`\`\`

\`\`\`yaml
apiVersion: v1
kind: Secret
metadata: { name: s }
---
apiVersion: v1
kind: ConfigMap
metadata: { name: c }
data:
  config.yaml: |
    ${CONFIG_MARKER}
    upstreams: [{ name: api, baseUrl: "https://api.example.com", clientId: a, clientSecret: b }]
\`\`\`
`;

  it("finds marked blocks, also in a ConfigMap among other objects", () => {
    expect(configSnippets(codeBlocks(markdown))).toHaveLength(3);
  });

  it("rejects a misspelt key and accepts variables with and without defaults", async () => {
    const [bad, good, inConfigMap] = configSnippets(codeBlocks(markdown));
    expect((await checkConfigSnippet(bad!.text)).join("\n")).toMatch(/additional properties/);
    expect(await checkConfigSnippet(good!.text)).toEqual([]);
    expect(await checkConfigSnippet(inConfigMap!.text)).toEqual([]);
  });

  it("rejects what only the loader knows (http:// without allowInsecureHttp)", async () => {
    const text = `${CONFIG_MARKER}\nupstreams:\n  - name: api\n    baseUrl: http://api.example.com\n    clientId: a\n    clientSecret: b\n`;
    expect((await checkConfigSnippet(text)).join("\n")).toMatch(/baseUrl/);
  });

  it("finds unknown commands and flags, in every spelling of the CLI", () => {
    expect(commandProblems("npx bearer-proxy valdate --config x")).toEqual([
      'unknown command "valdate" in: npx bearer-proxy valdate --config x',
    ]);
    expect(commandProblems("docker run --rm bearer-proxy:0.1.0 check --probe /x")).toEqual([
      "unknown flag --probe for check in: docker run --rm bearer-proxy:0.1.0 check --probe /x",
    ]);
    expect(commandProblems('kill -HUP "$(pidof bearer-proxy)"')).toEqual([]);
  });
});

describe.each(userPages())("$name", ({ name, text, blocks }) => {
  it("marks every bearer-proxy config snippet", () => {
    const unmarked = blocks.filter(
      (b) =>
        b.lang === "yaml" &&
        /^upstreams:/m.test(b.text) &&
        !b.text.startsWith(CONFIG_MARKER) &&
        !b.text.startsWith(VALUES_MARKER) &&
        !/^kind: ConfigMap$/m.test(b.text),
    );
    expect(unmarked.map((b) => `line ${b.line}`)).toEqual([]);
  });

  it("has only config snippets that bearer-proxy validate accepts", async () => {
    for (const snippet of configSnippets(blocks)) {
      expect(await checkConfigSnippet(snippet.text), `${name} line ${snippet.line}`).toEqual([]);
    }
  });

  it("has only Helm values that the chart's schema accepts and that render a valid config", async () => {
    for (const block of blocks.filter((b) => b.text.startsWith(`${VALUES_MARKER}\n`))) {
      const values = mergeValues(defaults, (parse(block.text) ?? {}) as Values);
      expect(formatErrors(validateValues(values)), `${name} line ${block.line}`).toBe("");
      expect(await validateWithLoader(JSON.stringify(renderChartConfig(values)))).toEqual([]);
    }
  });

  it("copies the chart's examples line for line, comments included (the file's header aside)", () => {
    for (const block of blocks.filter((b) => b.text.startsWith("# examples/"))) {
      const file = /^# (examples\/[\w.-]+)/.exec(block.text)![1]!;
      const original = readFileSync(join(CHART_DIR, file), "utf8");
      const body = original.slice(original.search(/^apiVersion:/m));
      const copy = block.text.slice(block.text.indexOf("\n") + 1);
      expect(copy, `${name} line ${block.line}`).toBe(body);
    }
  });

  it("has YAML blocks that parse (whole documents)", () => {
    for (const block of blocks.filter((b) => b.lang === "yaml")) {
      if (/^\s/.test(block.text) || block.text.includes("{{")) continue; // fragments, templates
      for (const doc of parseAllDocuments(block.text))
        expect(doc.errors.map(String), `${name} line ${block.line}`).toEqual([]);
    }
  });

  it("mentions only BEARER_PROXY_* variables bearer-proxy (or its test setup) reads", () => {
    const names = [...new Set(text.match(/\bBEARER_PROXY_[A-Z_]*[A-Z]\b/g) ?? [])];
    const unknown = names.filter((n) => !KNOWN_ENV_VARS.includes(n));
    expect(unknown.filter((n) => !vitestConfig.includes(`process.env.${n}`))).toEqual([]);
  });

  it("runs only bearer-proxy commands and flags that exist, in shell blocks and in the text", () => {
    const shellLines = blocks
      .filter((b) => b.lang === "sh")
      .flatMap((b) => b.text.replace(/\\\n/g, " ").split("\n"))
      .map((line) => line.replace(/(^|\s)#.*$/, "")); // shell comments
    const inline = [...prose(text).matchAll(/`(bearer-proxy [^`]+)`/g)].map((m) => m[1]!);
    expect([...shellLines, ...inline].flatMap(commandProblems)).toEqual([]);
  });
});

describe.each(GUIDES.map(readPage))("the guide $name", ({ text, blocks }) => {
  it("exists and has runnable examples", () => {
    expect(text).not.toBe("");
    expect(blocks.filter((b) => b.lang === "sh").length).toBeGreaterThan(0);
  });

  it("has at least one config snippet", () => {
    expect(configSnippets(blocks).length).toBeGreaterThan(0);
  });

  it('has a "try it locally" block', () => {
    expect(
      blocks.filter((b) => b.lang === "sh" && b.text.startsWith("# try it locally\n")),
    ).not.toHaveLength(0);
  });
});
