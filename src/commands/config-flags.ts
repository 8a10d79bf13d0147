/** CLI flag values -> the ConfigFlags loadConfig understands (flags > env > file > defaults). */
import type { ConfigFlags } from "../config/load.js";

type Values = Record<string, string | boolean | undefined>;

const FLAG_TO_FIELD = {
  "base-url": "baseUrl",
  "api-version": "apiVersion",
  "client-id": "clientId",
  "client-id-file": "clientIdFile",
  "client-secret": "clientSecret",
  "client-secret-file": "clientSecretFile",
  "token-request-format": "tokenRequestFormat",
  "client-auth": "clientAuth",
  "client-assertion-file": "clientAssertionFile",
  "ca-file": "caFile",
  listen: "listen",
  "admin-listen": "adminListen",
  "log-level": "logLevel",
  "log-format": "logFormat",
} as const satisfies Record<string, keyof ConfigFlags>;

/** The config settings among parsed command-line values. */
export function configFlagsFrom(values: Values): ConfigFlags {
  const flags: ConfigFlags = {};
  for (const [flag, field] of Object.entries(FLAG_TO_FIELD)) {
    const value = values[flag];
    if (typeof value === "string") flags[field] = value;
  }
  return flags;
}

/** The `--config` value, if any. */
export function configFileFrom(values: Values): string | undefined {
  return typeof values.config === "string" ? values.config : undefined;
}
