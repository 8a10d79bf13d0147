/**
 * Where the cluster's service-account signing keys come from: a JWKS file (re-read on change)
 * or the API server's JWKS URL, fetched by jose's remote key set over this project's own undici
 * Agent. jose refetches the URL when a token names a `kid` it has not seen (key rotation), but
 * at most once per cooldown, so a flood of made-up `kid`s cannot turn into a flood of fetches.
 * With `jwksTokenFile` every fetch presents that token (jwks-token-file.ts): the API server
 * serves its keys to authenticated service accounts, not to anonymous clients. A refresh that
 * fails keeps the keys last fetched in force, for a bounded time (jwks-fetch.ts), and
 * `lastRefreshFailed()` says so: those keys may lack one the cluster published since.
 */
import {
  type createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  type JWTVerifyGetKey,
} from "jose";
import type { Logger } from "pino";
import { ConfigError } from "../errors.js";
import { buildTlsOptions } from "../net/dispatcher.js";
import { Agent } from "../net/undici-core.js";
import type { KubernetesCallersConfig } from "./caller-types.js";
import { createJwksFetch, parseJwks, withFailureBackoff, withLastGoodKeys } from "./jwks-fetch.js";
import { JWKS_COOLDOWN_MS, JWKS_MAX_AGE_MS, JWKS_TIMEOUT_MS } from "./jwks-timing.js";
import { openJwksTokenFile } from "./jwks-token-file.js";
import { readWatchedFileSync, type WatchedFile, watchFile } from "./watched-file.js";

export {
  JWKS_COOLDOWN_MS,
  JWKS_MAX_AGE_MS,
  JWKS_RETRY_AFTER_FAILURE_MS,
  JWKS_STALE_LIMIT_MS,
  JWKS_TIMEOUT_MS,
} from "./jwks-timing.js";

/** The key resolver for jwtVerify, and how to stop what keeps it fresh. */
export interface JwksSource {
  getKey: JWTVerifyGetKey;
  /**
   * `jwksUri`: true while the latest fetch failed (the keys in use are the ones kept from an
   * earlier fetch, or none), so a key the cluster published since cannot be known. `jwksFile`:
   * false (a key missing from the file is for whoever writes it to add).
   */
  lastRefreshFailed(): boolean;
  /** `jwksFile`: stat the file now and reload it if it changed. `jwksUri`: nothing. */
  check(): Promise<void>;
  close(): Promise<void>;
}

export interface JwksSourceDeps {
  logger?: Pick<Logger, "warn" | "info"> | undefined;
  /** How often `jwksFile` is stat()ed; 0 disables polling. Default 1000. */
  pollIntervalMs?: number | undefined;
  /** NODE_EXTRA_CA_CERTS value, trusted besides `caFile` (injected so tests control it). */
  extraCaCertsFile?: string | undefined;
}

/** The key source `config` names: `jwksFile` or `jwksUri` (exactly one; config checks that). */
export function createJwksSource(
  config: KubernetesCallersConfig,
  deps: JwksSourceDeps = {},
): JwksSource {
  if (config.jwksFile !== undefined) return fileSource(config.jwksFile, deps);
  if (config.jwksUri !== undefined) return remoteSource(config, config.jwksUri, deps);
  throw new ConfigError([{ path: "callers.kubernetes", message: "needs jwksFile or jwksUri" }]);
}

function fileSource(file: string, deps: JwksSourceDeps): JwksSource {
  const path = "callers.kubernetes.jwksFile";
  let initial: ReturnType<typeof readWatchedFileSync>;
  let keySet: ReturnType<typeof createLocalJWKSet>;
  try {
    initial = readWatchedFileSync(file);
  } catch (error) {
    const code = (error as { code?: string }).code ?? "error";
    throw new ConfigError([{ path, message: `cannot read ${file} (${code})` }]);
  }
  try {
    keySet = parseJwks(initial.text);
  } catch (error) {
    throw new ConfigError([{ path, message: `${file}: ${(error as Error).message}` }]);
  }
  const watched: WatchedFile = watchFile({
    file,
    initial,
    pollIntervalMs: deps.pollIntervalMs,
    onChange(text) {
      // A bad file keeps the keys in force: a half-written rotation must not reject every token.
      keySet = parseJwks(text);
      deps.logger?.info({ file }, "callers.kubernetes JWKS file reloaded");
    },
    onError(error) {
      const code = (error as { code?: string }).code;
      deps.logger?.warn(
        { file, problem: code ?? (error as Error).message },
        "callers.kubernetes JWKS file changed but cannot be used; keeping the keys last loaded",
      );
    },
  });
  return {
    getKey: (header, token) => keySet(header, token),
    lastRefreshFailed: () => false,
    check: () => watched.check(),
    close: async () => watched.close(),
  };
}

function remoteSource(
  config: KubernetesCallersConfig,
  uri: string,
  deps: JwksSourceDeps,
): JwksSource {
  const { caFile, jwksTokenFile } = config;
  // The config checks say the same; this is where the token would leave, so check here too.
  if (jwksTokenFile !== undefined && new URL(uri).protocol !== "https:") {
    throw new ConfigError([
      {
        path: "callers.kubernetes.jwksTokenFile",
        message: "refused with a jwksUri that is not https://: the token would travel in clear",
      },
    ]);
  }
  const token =
    jwksTokenFile === undefined ? undefined : openJwksTokenFile(jwksTokenFile, deps.logger);
  let tls: ReturnType<typeof buildTlsOptions>;
  try {
    // System roots + NODE_EXTRA_CA_CERTS + caFile, as for upstreams (net/dispatcher.ts).
    tls = buildTlsOptions(
      { caFile, certFile: undefined, keyFile: undefined, serverName: undefined },
      deps.extraCaCertsFile ?? process.env.NODE_EXTRA_CA_CERTS,
    );
  } catch (error) {
    const code = (error as { code?: string }).code ?? (error as Error).message;
    throw new ConfigError([
      { path: "callers.kubernetes.caFile", message: `cannot use ${caFile} (${code})` },
    ]);
  }
  const agent = new Agent({
    connect: { ...tls, timeout: JWKS_TIMEOUT_MS },
    connections: 2,
    headersTimeout: JWKS_TIMEOUT_MS,
    bodyTimeout: JWKS_TIMEOUT_MS,
  });
  // The backoff sits below the kept keys: during it they are answered without a fetch.
  const fetchJwks = withLastGoodKeys(withFailureBackoff(createJwksFetch(agent, token)), {
    logger: deps.logger,
  });
  const keySet = createRemoteJWKSet(new URL(uri), {
    cooldownDuration: JWKS_COOLDOWN_MS,
    cacheMaxAge: JWKS_MAX_AGE_MS,
    timeoutDuration: JWKS_TIMEOUT_MS,
    [customFetch]: fetchJwks,
  });
  return {
    getKey: (header, token) => keySet(header, token),
    lastRefreshFailed: () => fetchJwks.lastRefreshFailed(),
    check: async () => {},
    close: () => agent.close(),
  };
}
