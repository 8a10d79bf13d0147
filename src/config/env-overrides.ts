/**
 * Settings from `BEARER_PROXY_*` environment variables and command-line flags, merged into the
 * parsed config document before it is validated. Precedence: flags > env > file > defaults.
 * Without a file, a base URL makes one upstream named `default` (sidecar mode).
 */

import type { Env } from "./interpolate.js";
import { type IssueList, isObject, toPointer } from "./issues.js";
import type { ListenSpec } from "./proxy-config.js";
import { didYouMean } from "./suggest.js";

/** Command-line settings; each mirrors a `BEARER_PROXY_*` variable (see `SETTINGS`). */
export interface ConfigFlags {
  baseUrl?: string;
  apiVersion?: string;
  clientId?: string;
  clientIdFile?: string;
  clientSecret?: string;
  clientSecretFile?: string;
  tokenRequestFormat?: string;
  clientAuth?: string;
  clientAssertionFile?: string;
  caFile?: string;
  /** `host:port` of the proxy listener. */
  listen?: string;
  /** `host:port` of the admin listener. */
  adminListen?: string;
  logLevel?: string;
  logFormat?: string;
}

export type SettingKey = keyof ConfigFlags;

interface SettingSpec {
  env: string;
  flag: string;
  /** `upstream` settings apply to the single upstream; `global` ones to the whole proxy. */
  scope: "upstream" | "global";
}

/** The env variable and flag of every setting. */
export const SETTINGS: Readonly<Record<SettingKey, SettingSpec>> = {
  baseUrl: { env: "BEARER_PROXY_BASE_URL", flag: "--base-url", scope: "upstream" },
  apiVersion: { env: "BEARER_PROXY_API_VERSION", flag: "--api-version", scope: "upstream" },
  clientId: { env: "BEARER_PROXY_CLIENT_ID", flag: "--client-id", scope: "upstream" },
  clientIdFile: { env: "BEARER_PROXY_CLIENT_ID_FILE", flag: "--client-id-file", scope: "upstream" },
  clientSecret: { env: "BEARER_PROXY_CLIENT_SECRET", flag: "--client-secret", scope: "upstream" },
  clientSecretFile: {
    env: "BEARER_PROXY_CLIENT_SECRET_FILE",
    flag: "--client-secret-file",
    scope: "upstream",
  },
  tokenRequestFormat: {
    env: "BEARER_PROXY_TOKEN_REQUEST_FORMAT",
    flag: "--token-request-format",
    scope: "upstream",
  },
  clientAuth: { env: "BEARER_PROXY_CLIENT_AUTH", flag: "--client-auth", scope: "upstream" },
  clientAssertionFile: {
    env: "BEARER_PROXY_CLIENT_ASSERTION_FILE",
    flag: "--client-assertion-file",
    scope: "upstream",
  },
  caFile: { env: "BEARER_PROXY_CA_FILE", flag: "--ca-file", scope: "upstream" },
  listen: { env: "BEARER_PROXY_LISTEN", flag: "--listen", scope: "global" },
  adminListen: { env: "BEARER_PROXY_ADMIN_LISTEN", flag: "--admin-listen", scope: "global" },
  logLevel: { env: "BEARER_PROXY_LOG_LEVEL", flag: "--log-level", scope: "global" },
  logFormat: { env: "BEARER_PROXY_LOG_FORMAT", flag: "--log-format", scope: "global" },
};

/** Names the config file when no `--config` is given. */
export const CONFIG_ENV = "BEARER_PROXY_CONFIG";

/** Every `BEARER_PROXY_*` variable the loader reads; others earn a "likely typo" warning. */
export const KNOWN_ENV_VARS: readonly string[] = [
  CONFIG_ENV,
  ...Object.values(SETTINGS).map((s) => s.env),
];

/** Name of the single upstream made from env/flags when there is no config file. */
export const SIDECAR_UPSTREAM = "default";

/** The credential settings that come in (inline, file) pairs: setting one replaces the other. */
const PAIRS: readonly (readonly [SettingKey, SettingKey])[] = [
  ["clientId", "clientIdFile"],
  ["clientSecret", "clientSecretFile"],
];

interface Given {
  key: SettingKey;
  value: string;
  /** `env BEARER_PROXY_LISTEN` or `flag --listen`: shown as the issue path. */
  label: string;
}

/** What the overrides did to the document. */
export interface OverrideResult {
  doc: unknown;
  /** JSON pointer → the env variable or flag its value came from. */
  provenance: Map<string, string>;
  /** Pointers of file values an override replaced or removed (their own problems no longer count). */
  replaced: Set<string>;
}

/** Parse `host:port` or `[v6]:port`; undefined when malformed. */
export function parseListenAddress(text: string): ListenSpec | undefined {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:\s[\]]+)):([0-9]{1,5})$/.exec(text);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port > 65535) return undefined;
  return { host: (m[1] ?? m[2])!, port };
}

/**
 * Merge env and flag settings into `doc` (a fresh tree from the file, or undefined without one).
 * Problems go to `issues`, named by their variable or flag.
 */
export function applyOverrides(
  doc: unknown,
  input: { env: Env; flags: ConfigFlags; hasFile: boolean },
  issues: IssueList,
): OverrideResult {
  const result: OverrideResult = { doc, provenance: new Map(), replaced: new Set() };
  warnUnknownEnv(input.env, issues);
  if (input.flags.clientSecret !== undefined) {
    issues.warn(
      [],
      "other users can read command-line arguments; prefer --client-secret-file or BEARER_PROXY_CLIENT_SECRET",
      "flag --client-secret",
    );
  }
  const effective = mergeLayers([envLayer(input.env), flagLayer(input.flags)], issues);
  const root = doc === undefined || doc === null ? {} : doc;
  if (!isObject(root)) return result; // the schema reports a root that is not a mapping
  result.doc = root;

  applyGlobal(root, effective, result, issues);

  const upstreamGiven = [...effective.values()].filter((g) => SETTINGS[g.key].scope === "upstream");
  const upstreams = root.upstreams;
  const noUpstreams =
    upstreams === undefined || (Array.isArray(upstreams) && upstreams.length === 0);
  if (noUpstreams && effective.has("baseUrl")) {
    root.upstreams = [{ name: SIDECAR_UPSTREAM }];
    applyToUpstream(root, 0, upstreamGiven, result);
  } else if (!input.hasFile) {
    issues.add(
      [],
      "nothing to proxy: expected a config file (--config or BEARER_PROXY_CONFIG) or an upstream base URL (--base-url or BEARER_PROXY_BASE_URL), found neither",
      "config",
    );
  } else if (upstreamGiven.length > 0 && Array.isArray(upstreams)) {
    if (upstreams.length === 1 && isObject(upstreams[0])) {
      applyToUpstream(root, 0, upstreamGiven, result);
    } else if (upstreams.length > 1) {
      const names = upstreams.map((u) =>
        isObject(u) && typeof u.name === "string" ? u.name : "?",
      );
      for (const given of upstreamGiven) {
        issues.add(
          [],
          `applies only to a single upstream, but the config file has ${upstreams.length} (${names.join(", ")}); set ${given.key} on the upstream in the file instead`,
          given.label,
        );
      }
    }
  }
  return result;
}

function envLayer(env: Env): Given[] {
  const out: Given[] = [];
  for (const [key, spec] of Object.entries(SETTINGS) as [SettingKey, SettingSpec][]) {
    const value = env[spec.env];
    // An empty variable counts as unset (as `FOO=` in a compose file usually means).
    if (value !== undefined && value !== "") out.push({ key, value, label: `env ${spec.env}` });
  }
  return out;
}

function flagLayer(flags: ConfigFlags): Given[] {
  const out: Given[] = [];
  for (const [key, spec] of Object.entries(SETTINGS) as [SettingKey, SettingSpec][]) {
    const value = flags[key];
    if (value !== undefined) out.push({ key, value, label: `flag ${spec.flag}` });
  }
  return out;
}

/** Later layers win; setting either half of a credential pair replaces both halves. */
function mergeLayers(layers: readonly Given[][], issues: IssueList): Map<SettingKey, Given> {
  const effective = new Map<SettingKey, Given>();
  for (const layer of layers) {
    const byKey = new Map(layer.map((g) => [g.key, g]));
    for (const [inline, file] of PAIRS) {
      const a = byKey.get(inline);
      const b = byKey.get(file);
      if (a && b) {
        issues.add(
          [],
          `set only one of ${a.label.split(" ")[1]} and ${b.label.split(" ")[1]}, found both`,
          b.label,
        );
        byKey.delete(file);
      }
      if (a || b) {
        effective.delete(inline);
        effective.delete(file);
      }
    }
    for (const [key, given] of byKey) effective.set(key, given);
  }
  return effective;
}

function applyGlobal(
  root: Record<string, unknown>,
  effective: Map<SettingKey, Given>,
  result: OverrideResult,
  issues: IssueList,
): void {
  for (const [key, docKey] of [
    ["listen", "listen"],
    ["adminListen", "admin"],
  ] as const) {
    const given = effective.get(key);
    if (!given) continue;
    const spec = parseListenAddress(given.value);
    if (!spec) {
      issues.add(
        [],
        `expected host:port such as "0.0.0.0:8080" or "[::1]:8080", found ${JSON.stringify(given.value)}`,
        given.label,
      );
      continue;
    }
    root[docKey] = spec;
    result.provenance.set(`/${docKey}`, given.label);
    result.replaced.add(`/${docKey}`);
  }
  for (const [key, field] of [
    ["logLevel", "level"],
    ["logFormat", "format"],
  ] as const) {
    const given = effective.get(key);
    if (!given) continue;
    root.log = { ...(isObject(root.log) ? root.log : {}), [field]: given.value };
    result.provenance.set(`/log/${field}`, given.label);
    result.replaced.add(`/log/${field}`);
  }
}

function applyToUpstream(
  root: Record<string, unknown>,
  index: number,
  given: readonly Given[],
  result: OverrideResult,
): void {
  const upstreams = root.upstreams as Record<string, unknown>[];
  const upstream = { ...upstreams[index] };
  upstreams[index] = upstream;
  const mark = (path: (string | number)[], label?: string) => {
    const pointer = toPointer(["upstreams", index, ...path]);
    result.replaced.add(pointer);
    if (label !== undefined) result.provenance.set(pointer, label);
  };
  for (const g of given) {
    if (g.key === "caFile") {
      upstream.tls = { ...(isObject(upstream.tls) ? upstream.tls : {}), caFile: g.value };
      mark(["tls", "caFile"], g.label);
      continue;
    }
    const pair = PAIRS.find((p) => p.includes(g.key));
    const other = pair?.find((k) => k !== g.key);
    if (other !== undefined && other in upstream) {
      delete upstream[other];
      mark([other]);
    }
    upstream[g.key] = g.value;
    mark([g.key], g.label);
  }
}

function warnUnknownEnv(env: Env, issues: IssueList): void {
  for (const name of Object.keys(env)) {
    if (name.startsWith("BEARER_PROXY_") && !KNOWN_ENV_VARS.includes(name)) {
      issues.warn(
        [],
        `unknown variable, ignored${didYouMean(name, KNOWN_ENV_VARS)}`,
        `env ${name}`,
      );
    }
  }
}
