/**
 * Upper bound on every duration in the document. The schema can't bound a string like "1000h",
 * and past MAX_DURATION_MS a Node.js timer fires after 1 ms: a long timeout would become an
 * instant one, and a long backoff a tight loop.
 */
import { schemasAt } from "./coerce.js";
import { describeValue, type IssueList, type IssuePath, isObject } from "./issues.js";
import { DURATION_PATTERN, MAX_DURATION_MS, parseDurationMs } from "./units.js";

const LIMIT_TEXT = `${Math.floor(MAX_DURATION_MS / 3_600_000)}h (${MAX_DURATION_MS} ms, the longest timer Node.js supports)`;

/** Report every well-formed duration longer than MAX_DURATION_MS (malformed ones are the schema's). */
export function validateDurations(doc: unknown, issues: IssueList, schema: unknown): void {
  const walk = (node: unknown, path: IssuePath): void => {
    if (Array.isArray(node)) {
      node.forEach((item, i) => {
        walk(item, [...path, i]);
      });
    } else if (isObject(node)) {
      for (const [k, v] of Object.entries(node)) walk(v, [...path, k]);
    } else if (typeof node === "string" || typeof node === "number") {
      checkLeaf(node, path);
    }
  };
  const checkLeaf = (value: string | number, path: IssuePath): void => {
    const ms = toMs(value);
    if (ms === undefined || ms <= MAX_DURATION_MS || !isDurationField(schema, path)) return;
    issues.add(path, `expected at most ${LIMIT_TEXT}, found ${describeValue(value, path)}`);
  };
  walk(doc, []);
}

function isDurationField(schema: unknown, path: IssuePath): boolean {
  return schemasAt(schema, path).some((s) => s.pattern === DURATION_PATTERN);
}

function toMs(value: string | number): number | undefined {
  try {
    return parseDurationMs(value);
  } catch {
    return undefined;
  }
}

/** True for a well-formed duration of zero (a malformed one is the schema's to report). */
export function durationIsZero(value: string | number): boolean {
  try {
    return parseDurationMs(value) === 0;
  } catch {
    return false;
  }
}
