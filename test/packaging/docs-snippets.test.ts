/**
 * The deployment guides in docs/ stay true to the code: every bearer-proxy config snippet
 * (a ```yaml block whose first line is `# bearer-proxy config`) passes the config schema and the
 * loader `bearer-proxy validate` uses; every Helm values snippet (`# helm values`) passes the
 * chart's values.schema.json; copies of the chart's examples (`# examples/<file>`) match them;
 * and the environment variables, commands, flags and links the guides mention exist.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { COMMANDS } from "../../src/commands/command-specs.js";
import { KNOWN_ENV_VARS } from "../../src/config/env-overrides.js";
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
const GUIDES = [
  "kubernetes-sidecar.md",
  "egress-gateway.md",
  "legacy-tools.md",
  "docker.md",
  "identity-providers.md",
  "callers.md",
];

interface CodeBlock {
  lang: string;
  text: string;
  line: number;
}

/** Fenced code blocks of a Markdown text. */
function codeBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  for (const m of markdown.matchAll(/^```([\w-]*)[^\n]*\n([\s\S]*?)^```[ \t]*$/gm)) {
    const line = markdown.slice(0, m.index).split("\n").length;
    blocks.push({ lang: m[1] ?? "", text: m[2] ?? "", line });
  }
  return blocks;
}

/** bearer-proxy config texts: marked yaml blocks, and marked `config.yaml` in ConfigMaps. */
function configSnippets(blocks: readonly CodeBlock[]): CodeBlock[] {
  const out: CodeBlock[] = [];
  for (const block of blocks.filter((b) => b.lang === "yaml")) {
    if (block.text.startsWith(`${CONFIG_MARKER}\n`)) out.push(block);
    else if (/^kind: ConfigMap$/m.test(block.text)) {
      const data = (parse(block.text) as { data?: Record<string, string> }).data ?? {};
      const text = data["config.yaml"];
      if (text?.startsWith(`${CONFIG_MARKER}\n`)) out.push({ ...block, text });
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

const guides = GUIDES.map((name) => {
  const path = join(REPO_ROOT, "docs", name);
  const text = existsSync(path) ? readFileSync(path, "utf8") : "";
  return { name, path, text, blocks: codeBlocks(text) };
});
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
`;

  it("finds marked blocks", () => {
    expect(configSnippets(codeBlocks(markdown))).toHaveLength(2);
  });

  it("rejects a misspelt key and accepts variables with and without defaults", async () => {
    const [bad, good] = configSnippets(codeBlocks(markdown));
    expect((await checkConfigSnippet(bad!.text)).join("\n")).toMatch(/additional properties/);
    expect(await checkConfigSnippet(good!.text)).toEqual([]);
  });

  it("rejects what only the loader knows (http:// without allowInsecureHttp)", async () => {
    const text = `${CONFIG_MARKER}\nupstreams:\n  - name: api\n    baseUrl: http://api.example.com\n    clientId: a\n    clientSecret: b\n`;
    expect((await checkConfigSnippet(text)).join("\n")).toMatch(/baseUrl/);
  });
});

describe.each(guides)("docs/$name", ({ name, path, text, blocks }) => {
  it("exists and has runnable examples", () => {
    expect(existsSync(path)).toBe(true);
    expect(blocks.filter((b) => b.lang === "sh").length).toBeGreaterThan(0);
  });

  it("marks every bearer-proxy config snippet, and has at least one", () => {
    const unmarked = blocks.filter(
      (b) =>
        b.lang === "yaml" &&
        /^upstreams:/m.test(b.text) &&
        !b.text.startsWith(CONFIG_MARKER) &&
        !b.text.startsWith(VALUES_MARKER) &&
        !/^kind: ConfigMap$/m.test(b.text),
    );
    expect(unmarked.map((b) => `line ${b.line}`)).toEqual([]);
    expect(configSnippets(blocks).length).toBeGreaterThan(0);
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

  it("copies the chart's examples exactly", () => {
    for (const block of blocks.filter((b) => b.text.startsWith("# examples/"))) {
      const file = /^# (examples\/[\w.-]+)/.exec(block.text)![1]!;
      const original = readFileSync(join(CHART_DIR, file), "utf8");
      const docs = (t: string) => parseAllDocuments(t).map((d) => d.toJS());
      expect(docs(block.text), `${name} line ${block.line}`).toEqual(docs(original));
    }
  });

  it("has YAML blocks that parse (whole documents)", () => {
    for (const block of blocks.filter((b) => b.lang === "yaml")) {
      if (/^\s/.test(block.text) || block.text.includes("{{")) continue; // fragments, templates
      for (const doc of parseAllDocuments(block.text))
        expect(doc.errors.map(String), `${name} line ${block.line}`).toEqual([]);
    }
  });

  it("mentions only BEARER_PROXY_* variables bearer-proxy reads", () => {
    const names = [...new Set(text.match(/\bBEARER_PROXY_[A-Z_]*[A-Z]\b/g) ?? [])];
    expect(names.filter((n) => !KNOWN_ENV_VARS.includes(n))).toEqual([]);
  });

  it("runs only bearer-proxy commands and flags that exist", () => {
    const problems: string[] = [];
    for (const block of blocks.filter((b) => b.lang === "sh")) {
      const lines = block.text.replace(/\\\n/g, " ").split("\n");
      for (const line of lines) {
        for (const m of line.matchAll(/\bbearer-proxy(?::[\w.-]+)?\s+([^|;&#)\n]*)/g)) {
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
      }
    }
    expect(problems).toEqual([]);
  });

  it("links only to files that exist", () => {
    const links = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
    const local = links.filter((l) => !/^[a-z]+:/.test(l) && !l.startsWith("#"));
    const missing = local.filter((l) => !existsSync(resolve(dirname(path), l.split("#")[0]!)));
    expect(missing).toEqual([]);
  });
});
