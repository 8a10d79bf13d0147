/**
 * Turning collected problems into what people read: `ConfigIssue`s whose path names the env
 * variable or flag a value came from, or its place in the file (with its line and the `${VAR}`
 * it was interpolated from).
 */
import { ConfigError, type ConfigIssue, errorMessage } from "../errors.js";
import { formatPath, type IssuePath, type RawIssue, toPointer } from "./issues.js";

/** What is known about where each value of the merged document came from. */
export interface ReportContext {
  /** The merged document (for upstream names in paths). */
  doc: unknown;
  /** JSON pointer → env variable / flag that set it. */
  provenance: ReadonlyMap<string, string>;
  /** JSON pointer → variables interpolated into it. */
  vars: ReadonlyMap<string, readonly string[]>;
  /** Line in the config file where a path was written. */
  lineOf?: (path: IssuePath) => number | undefined;
}

/** A raw issue as shown to people. */
export function toConfigIssue(raw: RawIssue, ctx: ReportContext): ConfigIssue {
  if (raw.source !== undefined) return { path: raw.source, message: raw.message };
  for (let n = raw.path.length; n >= 1; n--) {
    const label = ctx.provenance.get(toPointer(raw.path.slice(0, n)));
    if (label !== undefined) return { path: label, message: raw.message };
  }
  const notes: string[] = [];
  const vars = ctx.vars.get(toPointer(raw.path));
  if (vars && !vars.every((v) => raw.message.includes(v))) {
    notes.push(`from ${vars.map((v) => `\${${v}}`).join(", ")}`);
  }
  const line = ctx.lineOf?.(raw.path);
  if (line !== undefined) notes.push(`line ${line}`);
  return {
    path: formatPath(raw.path, ctx.doc),
    message: notes.length === 0 ? raw.message : `${raw.message} (${notes.join(", ")})`,
  };
}

/** `path: message`, the form warnings are returned in. */
export function issueText(issue: ConfigIssue): string {
  return `${issue.path}: ${issue.message}`;
}

/** A ConfigError that also carries the warnings found on the way (often the real cause: a typo'd variable). */
export function createConfigError(
  issues: readonly ConfigIssue[],
  warnings: readonly string[],
  source?: string,
): ConfigError {
  const error = new ConfigError(issues, source);
  Object.defineProperty(error, "warnings", {
    value: Object.freeze([...warnings]),
    enumerable: false,
  });
  return error;
}

/** Warnings attached to a ConfigError thrown by loadConfig (empty for others). */
export function configErrorWarnings(error: unknown): readonly string[] {
  const warnings = (error as { warnings?: unknown } | null)?.warnings;
  return Array.isArray(warnings) ? (warnings as string[]) : [];
}

/**
 * Every problem of a failed load, one per line, then any warnings — for `bearer-proxy validate`
 * and startup failures. Other errors give their message.
 */
export function formatConfigError(error: unknown): string {
  if (!(error instanceof ConfigError)) return errorMessage(error);
  const warnings = configErrorWarnings(error);
  if (warnings.length === 0) return error.message;
  return [error.message, `warnings (${warnings.length}):`, ...warnings.map((w) => `  ${w}`)].join(
    "\n",
  );
}
