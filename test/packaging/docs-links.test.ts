/**
 * Issue 32: the README became a front door and its sections moved to docs/. Every link between
 * the pages — README.md, docs/, the chart's and the bench's READMEs — reaches a file that exists
 * and, with `#anchor`, a heading of that file; and what the code, the chart and the bench say
 * about where something is documented (`docs/x.md`, `docs/x.md, "Heading"`) points at a page
 * and heading that exist.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import {
  fromRoot,
  headingAnchors,
  links,
  otherPages,
  type Page,
  readPage,
  userPages,
} from "./docs-tools.js";
import { REPO_ROOT } from "./schema-tools.js";

const anchorsOf = new Map<string, Set<string>>();
function anchors(file: string): Set<string> {
  let found = anchorsOf.get(file);
  if (!found) {
    found = headingAnchors(readFileSync(file, "utf8"));
    anchorsOf.set(file, found);
  }
  return found;
}

/** Links of a page whose file or heading is missing. */
function brokenLinks(page: Page): string[] {
  const broken: string[] = [];
  for (const link of links(page.text)) {
    if (/^[a-z]+:/.test(link)) continue; // https:, mailto:
    const [file = "", anchor] = link.split("#");
    const target = file === "" ? page.path : resolve(dirname(page.path), file);
    if (file !== "" && !existsSync(target)) {
      broken.push(`${link}: no file ${fromRoot(target)}`);
      continue;
    }
    if (anchor === undefined || !target.endsWith(".md")) continue;
    const headings = file === "" ? headingAnchors(page.text) : anchors(target);
    if (!headings.has(anchor)) broken.push(`${link}: no heading #${anchor} in ${fromRoot(target)}`);
  }
  return broken;
}

describe("the link checks themselves", () => {
  it("make GitHub's anchors, and find a missing heading", () => {
    const text =
      "# Title\n\n## HTTP/2 to the upstream (benchmark)\n\n## One path, normalized at the door\n\n```sh\n# not a heading\n```\n\n## Tokens\n\n## Tokens\n";
    expect([...headingAnchors(text)]).toEqual([
      "title",
      "http2-to-the-upstream-benchmark",
      "one-path-normalized-at-the-door",
      "tokens",
      "tokens-1",
    ]);
    const page = {
      name: "docs/x.md",
      path: join(REPO_ROOT, "docs", "x.md"),
      text: "## Tokens\n\n[a](operations.md#traces) [b](operations.md#no-such) [c](#tokens) [d](#tokenz) [e](nothing.md)",
      blocks: [],
    };
    expect(brokenLinks(page)).toEqual([
      "operations.md#no-such: no heading #no-such in docs/operations.md",
      "#tokenz: no heading #tokenz in docs/x.md",
      "nothing.md: no file docs/nothing.md",
    ]);
  });
});

describe.each([...userPages(), ...otherPages()])("$name", (page) => {
  it("links only to files and headings that exist", () => {
    expect(brokenLinks(page)).toEqual([]);
  });
});

describe("where the code, the chart and the bench say something is documented", () => {
  const tracked = execFileSync("git", ["ls-files", "src", "helm", "bench", "config", "scripts"], {
    cwd: REPO_ROOT,
    encoding: "utf8",
  })
    .split("\n")
    .filter((f) => /\.(ts|mjs|js|yaml|tpl|json|md)$/.test(f) && existsSync(join(REPO_ROOT, f)));

  it("names pages of docs/ that exist, and headings of them that exist", () => {
    const problems: string[] = [];
    for (const file of tracked) {
      const text = readFileSync(join(REPO_ROOT, file), "utf8");
      for (const m of text.matchAll(/\bdocs\/([\w-]+\.md)(?:,? "([^"]+)")?/g)) {
        const page = join(REPO_ROOT, "docs", m[1]!);
        if (!existsSync(page)) {
          problems.push(`${file}: docs/${m[1]} does not exist`);
          continue;
        }
        const heading = m[2];
        if (heading === undefined) continue;
        const headings = readPage(`docs/${m[1]}`).text.match(/^#{1,6} .+$/gm) ?? [];
        if (!headings.some((h) => h.replace(/^#+ /, "") === heading))
          problems.push(`${file}: docs/${m[1]} has no heading "${heading}"`);
      }
    }
    expect(problems).toEqual([]);
  });

  it("no longer sends readers to README sections that moved to docs/", () => {
    const moved = /README(?:\.md)?(?:#|[:,]? ")(?!Install|Quickstart)/;
    const stale = tracked.flatMap((file) =>
      readFileSync(join(REPO_ROOT, file), "utf8")
        .split("\n")
        .filter((line) => moved.test(line) && !line.includes("helm/bearer-proxy/README"))
        .map((line) => `${file}: ${line.trim()}`),
    );
    expect(stale).toEqual([]);
  });
});
