/**
 * Shared helpers for the packaging tests: validators for bearer-proxy's config schema and the
 * Helm chart's values schema, the chart's view of the config schema, and `${VAR}` substitution.
 */

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { loadConfigWithWarnings } from "../../src/config/load.js";
import { ConfigFile } from "../../src/config/schema.js";
import { ConfigError } from "../../src/errors.js";
import { ABSENT_CALLER_FILE, renderChartCallers } from "./chart-callers.js";

/** Repository root. */
export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The Helm chart's folder. */
export const CHART_DIR = join(REPO_ROOT, "helm", "bearer-proxy");

/** Config keys the chart renders itself; `config:` in values must not set them. */
export const CHART_OWNED_KEYS = ["listen", "admin", "shutdown", "callers"] as const;

/** A JSON value as ajv sees it (TypeBox's symbols dropped). */
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A plain-JSON copy of bearer-proxy's own `ConfigFile` schema. */
export function configFileJsonSchema(): { [key: string]: Json } {
  return JSON.parse(JSON.stringify(ConfigFile)) as { [key: string]: Json };
}

/**
 * The config schema as the chart accepts it under `config:`: bearer-proxy's schema without the
 * keys the chart owns (listen, admin, shutdown, tokenCache.redis). values.schema.json holds
 * exactly this under `definitions.config`.
 */
export function chartConfigSchema(): { [key: string]: Json } {
  const schema = configFileJsonSchema();
  const properties = schema.properties as { [key: string]: Json };
  for (const key of CHART_OWNED_KEYS) delete properties[key];
  const tokenCache = properties.tokenCache as { properties: { [key: string]: Json } };
  delete tokenCache.properties.redis;
  return {
    description:
      "bearer-proxy's config file (src/config/schema.ts) without listen, admin, shutdown and tokenCache.redis, which the chart renders from containerPorts, shutdown and redis. Generated: see test/packaging/helm-values.test.ts.",
    ...schema,
  };
}

/** Compiles a schema with the options bearer-proxy's loader uses: all errors, strict types off. */
export function compileSchema(schema: object): ValidateFunction {
  const ajv = new Ajv({ allErrors: true, strict: false });
  return ajv.compile(schema);
}

let configValidator: ValidateFunction | undefined;
/** Validates a parsed config file against bearer-proxy's `ConfigFile` schema. */
export function validateConfigFile(value: unknown): ErrorObject[] {
  configValidator ??= compileSchema(ConfigFile);
  return configValidator(value) ? [] : [...(configValidator.errors ?? [])];
}

/** Reads and parses the chart's values.schema.json. */
export function readValuesSchema(): { [key: string]: Json } {
  return JSON.parse(readFileSync(join(CHART_DIR, "values.schema.json"), "utf8")) as {
    [key: string]: Json;
  };
}

let valuesValidator: ValidateFunction | undefined;
/** Validates Helm values against the chart's values.schema.json (draft-07). */
export function validateValues(value: unknown): ErrorObject[] {
  valuesValidator ??= compileSchema(readValuesSchema());
  return valuesValidator(value) ? [] : [...(valuesValidator.errors ?? [])];
}

/** Placeholder for a `${VAR}` without a default: a string no pattern-free field rejects. */
export const ENV_PLACEHOLDER = "placeholder";

/**
 * Replaces `${VAR:-default}` with its default and `${VAR}` with a placeholder in every string,
 * as bearer-proxy's loader would with an environment that defines the variables.
 */
export function substituteEnv<T>(value: T): T {
  if (typeof value === "string") {
    return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_m, _name, fallback) =>
      fallback === undefined ? ENV_PLACEHOLDER : String(fallback),
    ) as T;
  }
  if (Array.isArray(value)) return value.map((item) => substituteEnv(item)) as T;
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, substituteEnv(item)]),
    ) as T;
  }
  return value;
}

/** One line per ajv error: `<path> <message>`. */
export function formatErrors(errors: readonly ErrorObject[]): string {
  return errors.map((e) => `${e.instancePath || "/"} ${e.message ?? ""}`).join("\n");
}

/** A Helm values tree. */
export type Values = { [key: string]: unknown };

function isPlainObject(value: unknown): value is Values {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * Helm's coalescing of user values over the chart's defaults: maps merge key by key, anything
 * else (lists included) is replaced, and a `null` override deletes the default.
 */
export function mergeValues(defaults: Values, overrides: Values): Values {
  const out: Values = { ...defaults };
  for (const [key, value] of Object.entries(overrides)) {
    if (value === null) delete out[key];
    else if (isPlainObject(value) && isPlainObject(out[key]))
      out[key] = mergeValues(out[key] as Values, value);
    else out[key] = value;
  }
  return out;
}

/**
 * The config file the chart renders into its ConfigMap (templates/_config.tpl, kept in step
 * with it by hand): `config` plus listen/admin on 0.0.0.0, shutdown from the seconds values and
 * tokenCache.redis from `redis` when enabled.
 */
export function renderChartConfig(values: Values): Values {
  const v = values as {
    config?: Values;
    containerPorts: { proxy: number; admin: number };
    shutdown: { drainDelaySeconds: number; timeoutSeconds: number };
    redis: {
      enabled: boolean;
      url: string;
      clusterNodes: string[];
      sentinel: {
        masterName: string;
        nodes: string[];
        username: string;
        sentinelUsername: string;
        tls: boolean;
        sentinelPasswordSecret: { name: string };
      };
      passwordSecret: { name: string };
      keyPrefix?: string;
      lockTtl?: string;
      commandTimeout?: string;
    };
  };
  const config: Values = structuredClone(v.config ?? {});
  config.listen = { host: "0.0.0.0", port: v.containerPorts.proxy };
  config.admin = { host: "0.0.0.0", port: v.containerPorts.admin };
  config.shutdown = {
    drainDelay: `${v.shutdown.drainDelaySeconds}s`,
    timeout: `${v.shutdown.timeoutSeconds}s`,
  };
  if (v.redis.enabled) {
    const redis: Values = {};
    if (v.redis.url) redis.url = v.redis.url;
    if (v.redis.clusterNodes.length > 0) redis.clusterNodes = v.redis.clusterNodes;
    const sentinel = v.redis.sentinel;
    if (sentinel.masterName) {
      const s: Values = { masterName: sentinel.masterName, nodes: sentinel.nodes };
      if (sentinel.username) s.username = sentinel.username;
      // biome-ignore-start lint/suspicious/noTemplateCurlyInString: ${VAR} is bearer-proxy's interpolation, written literally by the chart
      if (v.redis.passwordSecret.name) s.password = "${REDIS_PASSWORD}";
      if (sentinel.sentinelUsername) s.sentinelUsername = sentinel.sentinelUsername;
      if (sentinel.sentinelPasswordSecret.name) s.sentinelPassword = "${REDIS_SENTINEL_PASSWORD}";
      // biome-ignore-end lint/suspicious/noTemplateCurlyInString: see above
      if (sentinel.tls) s.tls = true;
      redis.sentinel = s;
    }
    if (v.redis.keyPrefix) redis.keyPrefix = v.redis.keyPrefix;
    if (v.redis.lockTtl) redis.lockTtl = v.redis.lockTtl;
    if (v.redis.commandTimeout) redis.commandTimeout = v.redis.commandTimeout;
    config.tokenCache = { ...((config.tokenCache as Values | undefined) ?? {}), redis };
  }
  const callers = renderChartCallers(values);
  if (callers) config.callers = callers;
  return config;
}

/** Names of the `${VAR}` references without a default (`${VAR:-x}` needs no value) in a text. */
export function requiredVariables(text: string): string[] {
  return [...text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]!);
}

/** Messages about credential/CA files that exist only where the config is deployed. */
const ABSENT_FILE = /^expected a readable file, found nothing at /;

/**
 * Runs a config text through bearer-proxy's real loader (what `bearer-proxy validate` does),
 * with each `${VAR}` that has no default set to a placeholder and no other environment (so
 * `${VAR:-default}` takes its default). Returns the problems, leaving out only files that are
 * absent on this machine (secrets mounted in a pod).
 */
export async function validateWithLoader(text: string): Promise<string[]> {
  const env = Object.fromEntries(requiredVariables(text).map((name) => [name, ENV_PLACEHOLDER]));
  try {
    await loadConfigWithWarnings({ configText: text, env, cwd: REPO_ROOT });
    return [];
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.issues
      .filter(
        (issue) => !ABSENT_FILE.test(issue.message) && !ABSENT_CALLER_FILE.test(issue.message),
      )
      .map((issue) => `${issue.path}: ${issue.message}`);
  }
}
