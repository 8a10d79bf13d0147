/**
 * Shared pieces of the documentation tests: the Markdown pages a user reads (README.md and
 * docs/), their fenced code blocks, their headings' anchors as GitHub renders them, and the
 * "try it locally" blocks.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { REPO_ROOT } from "./schema-tools.js";

/** A fenced code block: its info string's language, its text and the line it starts on. */
export interface CodeBlock {
  lang: string;
  text: string;
  line: number;
}

/** A Markdown page of the repository. */
export interface Page {
  /** Path from the repository root, e.g. `docs/callers.md`. */
  name: string;
  path: string;
  text: string;
  blocks: CodeBlock[];
}

/** The guides that take a reader from nothing to running (issue 32: a "try it locally" each). */
export const GUIDES = [
  "docs/kubernetes-sidecar.md",
  "docs/legacy-tools.md",
  "docs/egress-gateway.md",
  "docs/docker.md",
  "docs/callers.md",
] as const;

/** First line of a shell block the try-it test runs. */
export const TRY_MARKER = "# try it locally";

/** Fenced code blocks of a Markdown text. */
export function codeBlocks(markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  for (const m of markdown.matchAll(/^```([\w-]*)[^\n]*\n([\s\S]*?)^```[ \t]*$/gm)) {
    const line = markdown.slice(0, m.index).split("\n").length;
    blocks.push({ lang: m[1] ?? "", text: m[2] ?? "", line });
  }
  return blocks;
}

export function readPage(name: string): Page {
  const path = join(REPO_ROOT, name);
  const text = existsSync(path) ? readFileSync(path, "utf8") : "";
  return { name, path, text, blocks: codeBlocks(text) };
}

/** README.md and every page under docs/: what a user reads. */
export function userPages(): Page[] {
  const docs = readdirSync(join(REPO_ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`);
  return ["README.md", ...docs].map(readPage);
}

/** The other Markdown files that link into the docs (the chart's README, the bench's). */
export function otherPages(): Page[] {
  return ["helm/bearer-proxy/README.md", "bench/README.md"].map(readPage);
}

/** The text of a page outside its fenced code blocks (links and headings live there). */
export function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```[ \t]*$/gm, "");
}

/**
 * The anchors of a page's headings as GitHub makes them: lower case, markup and punctuation
 * other than `-` and `_` dropped, spaces to `-`, `-1`, `-2` … for repeats.
 */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const m of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = (m[1] ?? "").replace(/\[([^\]]*)\]\([^)]*\)/g, "$1");
    const base = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

/** `[text](target)` links of a page's prose. */
export function links(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

/** The "try it locally" shell blocks of the pages. */
export function tryBlocks(pages: readonly Page[]): (CodeBlock & { page: string })[] {
  return pages.flatMap((page) =>
    page.blocks
      .filter((b) => b.lang === "sh" && b.text.startsWith(`${TRY_MARKER}\n`))
      .map((b) => ({ ...b, page: page.name })),
  );
}

/** Path of a file relative to the repository root, for messages. */
export function fromRoot(path: string): string {
  return relative(REPO_ROOT, path);
}
