/**
 * Config problems as the loader collects them (located by their path in the merged document)
 * and how they are shown: `upstreams[0] (sheets).baseUrl`, found-values rendered without
 * ever echoing a secret.
 */

export type PathSegment = string | number;
export type IssuePath = readonly PathSegment[];

/** A problem located in the config document, or in an env variable / flag (`source`). */
export interface RawIssue {
  path: IssuePath;
  message: string;
  /** Shown instead of the document path, e.g. `env BEARER_PROXY_LISTEN` or `flag --listen`. */
  source?: string;
}

/** Collects problems and warnings while a config is checked. */
export class IssueList {
  readonly issues: RawIssue[] = [];
  readonly warnings: RawIssue[] = [];

  add(path: IssuePath, message: string, source?: string): void {
    this.issues.push(source === undefined ? { path, message } : { path, message, source });
  }

  warn(path: IssuePath, message: string, source?: string): void {
    this.warnings.push(source === undefined ? { path, message } : { path, message, source });
  }
}

/** JSON pointer (RFC 6901) of a path, used as a map key. */
export function toPointer(path: IssuePath): string {
  return path.map((s) => `/${String(s).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

/** Path segments of a JSON pointer as ajv reports it (`/upstreams/0/baseUrl`). */
export function fromPointer(pointer: string): PathSegment[] {
  if (pointer === "") return [];
  return pointer
    .slice(1)
    .split("/")
    .map((s) => {
      const key = s.replaceAll("~1", "/").replaceAll("~0", "~");
      return /^(0|[1-9][0-9]*)$/.test(key) ? Number(key) : key;
    });
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * `upstreams[0] (sheets).headers["x-api-key"]`: indexes in brackets, an upstream's name (when it
 * has one) in parentheses, odd keys quoted. The root is `(root)`.
 */
export function formatPath(path: IssuePath, doc: unknown): string {
  if (path.length === 0) return "(root)";
  let out = "";
  let node: unknown = doc;
  path.forEach((segment, i) => {
    node =
      isObject(node) || Array.isArray(node)
        ? (node as Record<string, unknown>)[segment]
        : undefined;
    if (typeof segment === "number") {
      out += `[${segment}]`;
      const name = isObject(node) ? node.name : undefined;
      if (i === 1 && path[0] === "upstreams" && typeof name === "string" && name !== "") {
        out += ` (${name})`;
      }
    } else if (IDENTIFIER.test(segment)) {
      out += out === "" ? segment : `.${segment}`;
    } else {
      out += `[${JSON.stringify(segment)}]`;
    }
  });
  return out;
}

/** Keys whose values may be credentials: never shown, only described. */
const SECRET_KEYS = new Set(["clientId", "clientSecret", "password", "sentinelPassword"]);
/** Maps whose values may be credentials (API keys in headers, assertions in token params). */
const SECRET_MAPS = new Set(["headers", "tokenHeaders", "tokenParams"]);

/** Whether the value at `path` may hold a credential. */
export function isSensitivePath(path: IssuePath): boolean {
  const last = path[path.length - 1];
  if (typeof last === "string" && SECRET_KEYS.has(last)) return true;
  return path.slice(0, -1).some((s) => typeof s === "string" && SECRET_MAPS.has(s));
}

const MAX_SHOWN = 80;

/** A found value for a message: `"5 sec"`, `42`, `a list`, or a description for secrets. */
export function describeValue(value: unknown, path: IssuePath = []): string {
  if (value === undefined) return "nothing";
  if (value === null) return "an empty value (null)";
  if (Array.isArray(value)) return value.length === 0 ? "an empty list" : "a list";
  if (typeof value === "object") return "a mapping";
  if (isSensitivePath(path)) {
    // Not even the length: it narrows a guess.
    if (value === "") return "an empty string";
    return typeof value === "string" ? "a hidden value" : `a hidden ${typeof value}`;
  }
  if (typeof value !== "string") return String(value);
  const safe = safeUrlText(value);
  return JSON.stringify(safe.length > MAX_SHOWN ? `${safe.slice(0, MAX_SHOWN)}…` : safe);
}

/**
 * A URL-ish string safe to show: `user:pass@` becomes `***@`, and the query (which often carries
 * API keys) becomes `?…`.
 */
export function safeUrlText(text: string): string {
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\//.test(text)) return text;
  return text.replace(/(\/\/)[^/?#@\s]*@/, "$1***@").replace(/\?[^#]*/, "?…");
}

/** A plain mapping (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
