/**
 * `loadConfig`: config file (YAML) + `BEARER_PROXY_*` env + flags → one validated, frozen
 * `ProxyConfig`, or a `ConfigError` listing every problem at once.
 *
 * Order: parse YAML → interpolate `${VAR}` → merge env/flags (flags > env > file) → coerce
 * interpolated numbers/booleans → schema → semantic checks → defaults and derived values.
 */
import { dirname, resolve } from "node:path";
import { readFile } from "../base/async-fs.js";
import type { ConfigIssue } from "../errors.js";
import { coerceDocument } from "./coerce.js";
import { loadConfigReport, loadConfigSchema } from "./config-schema.js";
import { applyOverrides, CONFIG_ENV, type ConfigFlags } from "./env-overrides.js";
import { type Env, interpolateDocument } from "./interpolate.js";
import { IssueList, type RawIssue, toPointer } from "./issues.js";
import { deepFreeze, normalizeConfig } from "./normalize.js";
import type { ParsedYaml } from "./parse-yaml.js";
import type { ProxyConfig } from "./proxy-config.js";
import { createConfigError, issueText, type ReportContext, toConfigIssue } from "./report.js";
import type { ConfigFile } from "./schema.js";
import { validateSchema } from "./schema-errors.js";
import { validateSemantics } from "./validate-semantics.js";

export type { ConfigFlags } from "./env-overrides.js";
export { configErrorWarnings, formatConfigError } from "./report.js";

/** Where the configuration comes from. */
export interface LoadConfigOptions {
  /** Config file path (relative to `cwd`). Without it, `BEARER_PROXY_CONFIG` may name one. */
  configFile?: string;
  /** YAML text used instead of reading `configFile` (tests); `configFile` then only sets the base folder. */
  configText?: string;
  /** Environment for `${VAR}` and `BEARER_PROXY_*`. Default `process.env`. */
  env?: Record<string, string | undefined>;
  /** Command-line settings; they win over env and file. */
  flags?: ConfigFlags;
  /** Base of relative paths given by flags/env and of `configFile`. Default `process.cwd()`. */
  cwd?: string;
}

/** A loaded config and the warnings worth showing (insecure HTTP, unknown variables, …). */
export interface LoadedConfig {
  config: ProxyConfig;
  /** `path: message` lines. */
  warnings: string[];
}

/** Load, validate and freeze the configuration. Throws `ConfigError` with every problem. */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<ProxyConfig> {
  return (await loadConfigWithWarnings(options)).config;
}

/** `loadConfig`, also returning the warnings. A thrown ConfigError carries them too (`configErrorWarnings`). */
export async function loadConfigWithWarnings(
  options: LoadConfigOptions = {},
): Promise<LoadedConfig> {
  const env: Env = options.env ?? process.env;
  const cwd = resolve(options.cwd ?? process.cwd());
  const { text, file } = await readSource(options, env, cwd);
  const hasFile = text !== undefined;

  let parsed: ParsedYaml | undefined;
  if (text !== undefined) {
    // Loaded only for a file: a sidecar configured from the environment never needs a YAML parser.
    const { parseYaml } = await import("./parse-yaml.js");
    parsed = parseYaml(text);
    if (parsed.errors.length > 0) {
      const report = { doc: undefined, provenance: new Map(), vars: new Map() };
      throw createConfigError(
        parsed.errors.map((e) => toConfigIssue(e, report)),
        parsed.warnings.map((w) => issueText(toConfigIssue(w, report))),
        file,
      );
    }
  }

  const interpolation = new IssueList();
  const { value, trace } = interpolateDocument(parsed?.value, env, interpolation);
  const overrides = new IssueList();
  const merged = applyOverrides(value, { env, flags: options.flags ?? {}, hasFile }, overrides);
  const stillCounts = (path: RawIssue["path"]) => !isReplaced(toPointer(path), merged.replaced);
  const doc = merged.doc;
  const fileSchema = await loadConfigSchema();
  coerceDocument(doc, trace.whole.filter(stillCounts), fileSchema.schema);

  const schema = new IssueList();
  // The quick check passes a valid document; only a failing one loads the detailed validator.
  if (!fileSchema.check(doc)) validateSchema(doc, schema, await loadConfigReport());
  const baseDir = file === undefined ? cwd : dirname(file);
  const pathContext = { baseDir, cwd, provenance: merged.provenance };
  const semantic = new IssueList();
  await validateSemantics(doc, { ...pathContext, hasFile, schema: fileSchema.schema }, semantic);

  const all = collateIssues({
    unresolved: interpolation.issues.filter((i) => stillCounts(i.path)),
    overrides: overrides.issues,
    schema: schema.issues,
    semantic: semantic.issues,
  });
  const report: ReportContext = {
    doc,
    provenance: merged.provenance,
    vars: trace.vars,
    ...(parsed ? { lineOf: parsed.lineOf } : {}),
  };
  const warnings = [...(parsed?.warnings ?? []), ...overrides.warnings, ...semantic.warnings].map(
    (w) => issueText(toConfigIssue(w, report)),
  );
  if (all.length > 0) throw createConfigError(sortIssues(all, report), warnings, file);
  const config = deepFreeze(normalizeConfig(doc as ConfigFile, pathContext));
  return { config, warnings };
}

/** All problems of a load, minus those that only repeat another one. */
function collateIssues(found: {
  unresolved: readonly RawIssue[];
  overrides: readonly RawIssue[];
  schema: readonly RawIssue[];
  semantic: readonly RawIssue[];
}): RawIssue[] {
  // A value with an unset variable is wrong because of it: don't also report its consequences.
  const unresolvedAt = new Set(found.unresolved.map((i) => toPointer(i.path)));
  const nothingToProxy = found.overrides.some((i) => i.source === "config");
  const consequences = (i: RawIssue) =>
    unresolvedAt.has(toPointer(i.path)) ||
    // Without file and base URL, "upstreams: required" only repeats "nothing to proxy".
    (nothingToProxy && i.path.length === 1 && i.path[0] === "upstreams");
  return [
    ...found.unresolved,
    ...found.overrides,
    ...found.schema.filter((i) => !consequences(i)),
    ...found.semantic.filter((i) => !consequences(i)),
  ];
}

/** Env/flag problems first, then file problems in line order (phase order breaks ties). */
function sortIssues(raw: readonly RawIssue[], report: ReportContext): ConfigIssue[] {
  const keyed = raw.map((issue, index) => {
    const shown = toConfigIssue(issue, report);
    const fromFile =
      issue.source === undefined &&
      !shown.path.startsWith("env ") &&
      !shown.path.startsWith("flag ");
    const line = fromFile ? (report.lineOf?.(issue.path) ?? Number.MAX_SAFE_INTEGER) : -1;
    return { shown, line, index };
  });
  keyed.sort((a, b) => a.line - b.line || a.index - b.index);
  return keyed.map((k) => k.shown);
}

/** Whether a value at `pointer` (or an ancestor) was replaced by an env/flag override. */
function isReplaced(pointer: string, replaced: ReadonlySet<string>): boolean {
  for (const r of replaced) if (pointer === r || pointer.startsWith(`${r}/`)) return true;
  return false;
}

async function readSource(
  options: LoadConfigOptions,
  env: Env,
  cwd: string,
): Promise<{ text: string | undefined; file: string | undefined }> {
  let label = "config file";
  let name = options.configFile;
  if (name === undefined && options.configText === undefined && env[CONFIG_ENV]) {
    name = env[CONFIG_ENV];
    label = `env ${CONFIG_ENV}`;
  }
  const file = name === undefined ? undefined : resolve(cwd, name);
  if (options.configText !== undefined) return { text: options.configText, file };
  if (file === undefined) return { text: undefined, file };
  try {
    return { text: await readFile(file, "utf8"), file };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === "ENOENT"
        ? "no such file"
        : code === "EISDIR"
          ? "it is a directory"
          : code === "EACCES"
            ? "permission denied"
            : (code ?? String(error));
    throw createConfigError([{ path: label, message: `cannot read ${file}: ${reason}` }], [], file);
  }
}
