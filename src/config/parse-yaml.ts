/**
 * YAML text → plain data, with syntax errors reported as `line L, column C` and a way to find the
 * line where any path of the document was written (for messages about valid YAML that is a
 * wrong config).
 */
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type YAMLError } from "yaml";
import type { IssuePath, RawIssue } from "./issues.js";

/** A parsed config text. */
export interface ParsedYaml {
  /** The document as plain data (undefined when there were syntax errors). */
  value: unknown;
  /** Syntax errors: each an issue whose path shows `line L, column C`. */
  errors: RawIssue[];
  /** Non-fatal remarks from the parser (unknown tags …). */
  warnings: RawIssue[];
  /** Line (1-based) where the value at `path` — or its nearest written ancestor — is. */
  lineOf(path: IssuePath): number | undefined;
}

/**
 * Parse YAML 1.2 (core schema: `yes`/`on` stay strings) with `<<` merge keys allowed, so repeated
 * upstream settings can share an anchor.
 */
export function parseYaml(text: string): ParsedYaml {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: true, merge: true });
  const toIssue = (e: YAMLError): RawIssue => {
    const pos = e.linePos?.[0];
    const where = pos ? `line ${pos.line}, column ${pos.col}` : "yaml";
    return { path: [], source: where, message: firstLine(e.message) };
  };
  const errors = doc.errors.map(toIssue);
  const warnings = doc.warnings.map(toIssue);
  let value: unknown;
  if (errors.length === 0) {
    try {
      value = doc.toJS();
    } catch (error) {
      // e.g. "Excessive alias count" from an alias bomb.
      errors.push({ path: [], source: "yaml", message: (error as Error).message });
    }
  }
  const lineOf = (path: IssuePath): number | undefined => {
    let node: unknown = doc.contents;
    let offset = isNodeWithRange(node) ? node.range[0] : undefined;
    for (const segment of path) {
      if (isMap(node)) {
        const pair = node.items.find(
          (p) => isScalar(p.key) && String(p.key.value) === String(segment),
        );
        if (!pair) break;
        if (isNodeWithRange(pair.key)) offset = pair.key.range[0];
        node = pair.value;
      } else if (isSeq(node) && typeof segment === "number") {
        node = node.items[segment];
        if (!isNodeWithRange(node)) break;
        offset = node.range[0];
      } else {
        break;
      }
    }
    return offset === undefined ? undefined : lines.linePos(offset).line;
  };
  return { value, errors, warnings, lineOf };
}

function firstLine(message: string): string {
  const line = message.split("\n", 1)[0] ?? message;
  return line.replace(/ at line \d+, column \d+:?$/, "");
}

function isNodeWithRange(node: unknown): node is { range: [number, number, number] } {
  return (
    typeof node === "object" && node !== null && Array.isArray((node as { range?: unknown }).range)
  );
}
