/**
 * Issue 32, "one truth everywhere": the README is a front door (its quickstart lines verbatim,
 * the demo's ports as `demo --help` states them, at most ~250 lines); the install commands are
 * the ones that work — no `npm install -g bearer-proxy` (the package is not published), one
 * global install from the packed tarball, run as written by fresh-clone.test.ts; the image is
 * built from the Dockerfile and referenced from your registry, never a public one that does not
 * exist; and the proxy's idle memory is stated in one place, docs/benchmark.md.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { COMMANDS } from "../../src/commands/command-specs.js";
import { otherPages, readPage, userPages } from "./docs-tools.js";
import { CHART_DIR, REPO_ROOT } from "./schema-tools.js";

const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
  version: string;
};
const readme = readPage("README.md");
const pages = [...userPages(), ...otherPages()];

/** Every tracked text file a user or operator reads or copies (docs, chart, config, Dockerfile). */
const shipped = execFileSync(
  "git",
  ["ls-files", "README.md", "docs", "helm", "config", "Dockerfile", "bench/README.md"],
  { cwd: REPO_ROOT, encoding: "utf8" },
)
  .split("\n")
  .filter((f) => f !== "" && existsSync(join(REPO_ROOT, f)))
  .map((f) => ({ name: f, text: readFileSync(join(REPO_ROOT, f), "utf8") }));

/** The lines of a shell block section of a page: between `## heading` and the next `## `. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n## ${heading}\n`);
  if (start < 0) return "";
  const end = markdown.indexOf("\n## ", start + 1);
  return markdown.slice(start, end < 0 ? undefined : end);
}

describe("the README, a front door", () => {
  it("fits in about 250 lines", () => {
    expect(readme.text.split("\n").length).toBeLessThanOrEqual(250);
  });

  it("has the quickstart's two commands verbatim (CI greps for them), and .ci/run runs the second", () => {
    const lines = readme.text.split("\n");
    expect(lines).toContain("npm ci && npm start");
    expect(lines).toContain("npm ci && npm test");
    const ci = readFileSync(join(REPO_ROOT, ".ci/run"), "utf8").split("\n");
    expect(ci).toContain("npm ci && npm test");
  });

  it("gives the demo's ports and flags as `bearer-proxy demo --help` does", () => {
    const quickstart = section(readme.text, "Quickstart");
    const options = COMMANDS.demo.options;
    for (const flag of ["port", "admin-port", "emulator-port"]) {
      const help = options.find((o) => o.name === flag)?.help ?? "";
      const port = /default (\d+)/.exec(help)?.[1];
      expect(port, flag).toBeDefined();
      expect(quickstart).toMatch(new RegExp(`\\| ${port} \\| \`--${flag} N\` \\|`));
    }
  });
});

describe("install commands that work as written", () => {
  it("never tells anyone to install bearer-proxy from the npm registry (only that it fails)", () => {
    const registry = /npm (?:install|i|add) (?:-g|--global) bearer-proxy(?:@[\w.]+)?(?=[\s`]|$)/;
    const told = shipped.flatMap((f) =>
      f.text
        .split("\n")
        .filter((line) => registry.test(line) && !line.includes("answers 404"))
        .map((line) => `${f.name}: ${line.trim()}`),
    );
    expect(told).toEqual([]);
    expect(
      registry.test("npm install -g bearer-proxy          # or: npx bearer-proxy --help"),
    ).toBe(true);
    expect(
      registry.test("npm install -g ./bearer-proxy-0.1.0.tgz   # puts bearer-proxy on the PATH"),
    ).toBe(false);
  });

  it("installs globally only the packed tarball, as the README's Install section does", () => {
    const tarball = `npm install -g ./bearer-proxy-${pkg.version}.tgz`;
    const install = section(readme.text, "Install");
    expect(install).toContain(`npm pack `);
    expect(install).toContain(tarball);
    const others = pages.flatMap((page) =>
      page.blocks
        .filter((b) => b.lang === "sh")
        .flatMap((b) => b.text.split("\n"))
        .filter((line) => /\bnpm (?:install|i) (?:-g|--global)\b/.test(line))
        .map((line) => line.replace(/\s+#.*$/, "").trim())
        .filter((line) => line !== tarball)
        .map((line) => `${page.name}: ${line}`),
    );
    expect(others).toEqual([]);
  });
});

describe("the image: built from the Dockerfile, pushed to your registry", () => {
  const values = parse(readFileSync(join(CHART_DIR, "values.yaml"), "utf8")) as {
    image: { repository: string };
  };
  const local = `bearer-proxy:${pkg.version}`;
  const pushed = `${values.image.repository}:${pkg.version}`;

  it("is the chart's default image a placeholder for your registry, not a public image", () => {
    expect(values.image.repository).toBe("registry.example.com/bearer-proxy");
  });

  it("names no public registry that holds no image", () => {
    expect(
      shipped.filter((f) => /ghcr\.io|docker\.io\/bearer-proxy/.test(f.text)).map((f) => f.name),
    ).toEqual([]);
  });

  it("is referenced as the local build or as the copy in your registry, of this version", () => {
    const refs = shipped.flatMap((f) =>
      [...f.text.matchAll(/[\w.:/-]*\bbearer-proxy:(?:\d[\w.-]*|latest)\b/g)]
        .map((m) => m[0])
        .filter((ref) => ref !== local && ref !== pushed)
        .map((ref) => `${f.name}: ${ref}`),
    );
    expect(refs).toEqual([]);
  });

  it("is built with the tag the Dockerfile's own header gives", () => {
    const dockerfile = readFileSync(join(REPO_ROOT, "Dockerfile"), "utf8");
    expect(dockerfile).toContain(`docker build -t ${local} `);
    const tags = shipped.flatMap((f) =>
      [...f.text.matchAll(/docker build -t (\S+)/g)].map((m) => `${f.name}: ${m[1]}`),
    );
    expect(tags.length).toBeGreaterThan(0);
    expect(tags.filter((t) => !t.endsWith(`: ${local}`))).toEqual([]);
  });

  it("is pushed under the name the chart and the Kubernetes examples pull", () => {
    const docker = readPage("docs/docker.md").text;
    expect(docker).toContain(`docker tag ${local} ${pushed}`);
    expect(docker).toContain(`docker push ${pushed}`);
  });
});

describe("the proxy's memory, stated once", () => {
  // "~100 MiB RSS idle", "65–80 MiB idle", "idle RSS of 77 MiB": an idle figure, not a delta.
  const idleFigure =
    /\d[\d.,]*(?:\s*[–-]\s*\d[\d.,]*)?\s*MiB\s+(?:of\s+)?(?:RSS\s+)?(?:when\s+)?idle\b|\bidle\s+(?:RSS\s+)?(?:is\s+|of\s+)?~?\d[\d.,]*(?:\s*[–-]\s*\d[\d.,]*)?\s*MiB/i;

  it("in docs/benchmark.md, under a heading the others link to", () => {
    const benchmark = readPage("docs/benchmark.md").text;
    expect(benchmark).toMatch(/^## Memory and Node flags$/m);
    expect(benchmark).toMatch(/RSS 10 s after ready/);
  });

  it("and nowhere else: the others link instead of repeating a number", () => {
    const repeated = shipped
      .filter((f) => f.name !== "docs/benchmark.md")
      .flatMap((f) =>
        f.text
          .split("\n")
          .filter((line) => idleFigure.test(line))
          .map((line) => `${f.name}: ${line.trim()}`),
      );
    expect(repeated).toEqual([]);
  });

  it("(the pattern finds what the issue found)", () => {
    expect(idleFigure.test("memory: 128Mi # ~100 MiB RSS idle (README)")).toBe(true);
    expect(idleFigure.test("RSS is 66-81 MiB idle with the default nodeOptions")).toBe(true);
    expect(idleFigure.test("on top of ~100 MiB idle")).toBe(true);
    expect(idleFigure.test("~7 MiB less RSS idle")).toBe(false);
  });
});

describe("the reload line", () => {
  it("in docs/operations.md is the one test/cli/process-name.test.ts runs as written", () => {
    const line = 'kill -HUP "$(pidof bearer-proxy)"';
    expect(readPage("docs/operations.md").text).toContain(line);
    expect(readFileSync(join(REPO_ROOT, "test/cli/process-name.test.ts"), "utf8")).toContain(
      `'${line}'`,
    );
  });
});
