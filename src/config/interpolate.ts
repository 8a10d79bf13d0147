/**
 * `${VAR}` and `${VAR:-default}` in config string values. Runs on the parsed document, scalar by
 * scalar, so a variable's value can never inject YAML structure. `$${` writes a literal `${`.
 */
import { type IssueList, type IssuePath, isObject, isSensitivePath, toPointer } from "./issues.js";

/** Environment variables as `process.env` holds them. */
export type Env = Readonly<Record<string, string | undefined>>;

/** The outcome of interpolating one string. */
export interface InterpolatedString {
  value: string;
  /** Variables referenced, in order. */
  vars: string[];
  /** Referenced variables that are unset and have no default. */
  missing: string[];
  /** Malformed references, described. */
  errors: string[];
  /** The whole string was one reference, so it may be coerced to the field's type. */
  whole: boolean;
}

const REFERENCE = /^([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?$/;

/**
 * Interpolate one string. `${VAR:-default}` uses the default when VAR is unset or empty (as the
 * shell does); `${VAR}` of an empty VAR gives "". The default is literal text up to the first `}`.
 * With `sensitive` (a secret's value), error messages never quote the text.
 */
export function interpolateString(
  text: string,
  env: Env,
  options: { sensitive?: boolean } = {},
): InterpolatedString {
  const result: InterpolatedString = { value: "", vars: [], missing: [], errors: [], whole: false };
  let out = "";
  let i = 0;
  let references = 0;
  while (i < text.length) {
    const dollar = text.indexOf("$", i);
    if (dollar === -1) {
      out += text.slice(i);
      break;
    }
    out += text.slice(i, dollar);
    if (text.startsWith("$${", dollar)) {
      out += "${";
      i = dollar + 3;
      continue;
    }
    if (!text.startsWith("${", dollar)) {
      out += "$";
      i = dollar + 1;
      continue;
    }
    const close = text.indexOf("}", dollar + 2);
    if (close === -1) {
      result.errors.push(
        `unclosed "\${" at character ${dollar + 1} (write "$\${" for a literal "\${")`,
      );
      out += text.slice(dollar);
      break;
    }
    references++;
    const body = text.slice(dollar + 2, close);
    i = close + 1;
    const m = REFERENCE.exec(body);
    if (!m) {
      // In a secret the "reference" may be part of the secret itself: don't echo it.
      const found = options.sensitive ? `a malformed "\${…}"` : `"\${${body}}"`;
      result.errors.push(
        `expected \${NAME} or \${NAME:-default}, found ${found} (write "$\${" for a literal "\${")`,
      );
      continue;
    }
    const name = m[1]!;
    const fallback = m[2];
    result.vars.push(name);
    const value = env[name];
    if (value !== undefined && (value !== "" || fallback === undefined)) out += value;
    else if (fallback !== undefined) out += fallback;
    else result.missing.push(name);
  }
  result.value = out;
  result.whole = references === 1 && /^\$\{[^}]*\}$/.test(text);
  return result;
}

/** Where interpolation put values: pointer → variables used, and which scalars were whole references. */
export interface InterpolationTrace {
  /** JSON pointer → the variables its value came from. */
  readonly vars: Map<string, readonly string[]>;
  /** Paths whose entire value was one `${…}` (candidates for number/boolean coercion). */
  readonly whole: IssuePath[];
}

/**
 * Interpolate every string value in a parsed document (keys are left alone). Problems (unset
 * variables, malformed references) go to `issues` under the value's path.
 */
export function interpolateDocument(
  doc: unknown,
  env: Env,
  issues: IssueList,
): { value: unknown; trace: InterpolationTrace } {
  const trace: InterpolationTrace = { vars: new Map(), whole: [] };
  const walk = (node: unknown, path: IssuePath): unknown => {
    if (typeof node === "string") {
      if (!node.includes("$")) return node;
      const r = interpolateString(node, env, { sensitive: isSensitivePath(path) });
      for (const name of r.missing) {
        issues.add(
          path,
          `environment variable ${name} is not set (write \${${name}:-default} to give a default)`,
        );
      }
      for (const error of r.errors) issues.add(path, error);
      if (r.vars.length > 0) trace.vars.set(toPointer(path), r.vars);
      if (r.whole && r.missing.length === 0) trace.whole.push(path);
      return r.value;
    }
    if (Array.isArray(node)) return node.map((item, index) => walk(item, [...path, index]));
    if (isObject(node)) {
      return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, walk(v, [...path, k])]));
    }
    return node;
  };
  return { value: walk(doc, []), trace };
}
