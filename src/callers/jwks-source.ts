/**
 * Where the cluster's service-account signing keys come from: a JWKS file (re-read on change)
 * or the API server's JWKS URL, fetched by jose's remote key set over this project's own undici
 * Agent. jose refetches the URL when a token names a `kid` it has not seen (key rotation), but
 * at most once per cooldown, so a flood of made-up `kid`s cannot turn into a flood of fetches.
 * With `jwksTokenFile` every fetch presents that token (jwks-token-file.ts): the API server
 * serves its keys to authenticated service accounts, not to anonymous clients.
 */
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  type FetchImplementation,
  type JWTVerifyGetKey,
} from "jose";
import type { Logger } from "pino";
import type { Dispatcher } from "undici";
import { ConfigError } from "../errors.js";
import { buildTlsOptions } from "../net/dispatcher.js";
import { Agent, request } from "../net/undici-core.js";
import { fingerprint } from "../token/fingerprint.js";
import { type JwksTokenFile, openJwksTokenFile } from "./jwks-token-file.js";
import type { KubernetesCallersConfig } from "./types.js";
import { readWatchedFileSync, type WatchedFile, watchFile } from "./watched-file.js";

/** After a fetch, an unknown `kid` may trigger the next one only this much later. */
export const JWKS_COOLDOWN_MS = 30_000;
/** Keys are refetched at least this often even when every `kid` is known (removed keys go). */
export const JWKS_MAX_AGE_MS = 10 * 60_000;
/** One JWKS fetch (connect, headers and body) must finish within this. */
export const JWKS_TIMEOUT_MS = 5_000;
/**
 * After a failed fetch the next one waits this long. jose's cooldown counts from a successful
 * fetch only, so without this an outage would send one fetch per service-account caller.
 */
export const JWKS_RETRY_AFTER_FAILURE_MS = 5_000;
/** A cluster publishes a handful of keys; anything near this is not a JWKS. */
const MAX_JWKS_BYTES = 1024 * 1024;

/** The key resolver for jwtVerify, and how to stop what keeps it fresh. */
export interface JwksSource {
  getKey: JWTVerifyGetKey;
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
    check: () => watched.check(),
    close: async () => watched.close(),
  };
}

/** JSON with a `keys` array, as jose's local key set wants it (it throws JWKSInvalid otherwise). */
function parseJwks(text: string): ReturnType<typeof createLocalJWKSet> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error("not JSON");
  }
  try {
    return createLocalJWKSet(json as Parameters<typeof createLocalJWKSet>[0]);
  } catch {
    throw new Error('not a JSON Web Key Set (expected {"keys": [...]})');
  }
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
  const keySet = createRemoteJWKSet(new URL(uri), {
    cooldownDuration: JWKS_COOLDOWN_MS,
    cacheMaxAge: JWKS_MAX_AGE_MS,
    timeoutDuration: JWKS_TIMEOUT_MS,
    [customFetch]: withFailureBackoff(createJwksFetch(agent, token)),
  });
  return {
    getKey: (header, token) => keySet(header, token),
    check: async () => {},
    close: () => agent.close(),
  };
}

/**
 * jose's fetch hook over undici's `request` (the global fetch would use Node's bundled undici
 * and the global dispatcher; loading undici's own fetch costs memory, see net/undici-core.ts).
 * No redirect is followed (jose asks for `redirect: "manual"` and wants a 200), so the token
 * goes to `jwksUri`'s origin only. `token`, when given, is read afresh for each fetch.
 */
export function createJwksFetch(
  dispatcher: Dispatcher,
  token?: JwksTokenFile | undefined,
): FetchImplementation {
  return async (url, options) => {
    try {
      const headers = Object.fromEntries(options.headers.entries());
      const sent = token === undefined ? undefined : await token.read();
      if (sent !== undefined) headers.authorization = `Bearer ${sent}`;
      const response = await request(url, {
        dispatcher,
        method: "GET",
        headers,
        signal: options.signal,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_JWKS_BYTES) {
          response.body.destroy();
          throw new Error(`JWKS response larger than ${MAX_JWKS_BYTES} bytes`);
        }
        chunks.push(chunk as Buffer);
      }
      if (response.statusCode === 401 || response.statusCode === 403) {
        // jose would say only "Expected 200 OK"; this is the answer an operator must act on.
        throw new Error(refusalMessage(response.statusCode, sent));
      }
      const nullBody = response.statusCode === 204 || response.statusCode === 304;
      return new Response(nullBody ? null : Buffer.concat(chunks), {
        status: response.statusCode,
      });
    } catch (error) {
      // jose maps a TimeoutError to JWKSTimeout; undici reports the abort as its own error.
      if (options.signal.aborted) throw options.signal.reason;
      throw error;
    }
  };
}

/**
 * `fetch`, except that within JWKS_RETRY_AFTER_FAILURE_MS of a failure (an error, or an answer
 * other than 200) it fails at once with the same reason and sends nothing.
 */
export function withFailureBackoff(
  fetch: FetchImplementation,
  now: () => number = Date.now,
): FetchImplementation {
  let failedAtMs = Number.NEGATIVE_INFINITY;
  let reason = "";
  return async (url, options) => {
    const sinceMs = now() - failedAtMs;
    if (sinceMs < JWKS_RETRY_AFTER_FAILURE_MS) {
      const waitS = Math.ceil((JWKS_RETRY_AFTER_FAILURE_MS - sinceMs) / 1000);
      throw new Error(`the last JWKS fetch failed (${reason}); the next is allowed in ${waitS} s`);
    }
    try {
      const response = await fetch(url, options);
      if (response.status === 200) failedAtMs = Number.NEGATIVE_INFINITY;
      else [failedAtMs, reason] = [now(), `answered ${response.status}`];
      return response;
    } catch (error) {
      [failedAtMs, reason] = [now(), error instanceof Error ? error.message : String(error)];
      throw error;
    }
  };
}

/** Why the JWKS server refused the fetch, and what to change; the token only by fingerprint. */
function refusalMessage(status: 401 | 403, sent: string | undefined): string {
  if (sent === undefined) {
    return `the JWKS server answered ${status} to an anonymous fetch: the API server's /openid/v1/jwks serves authenticated service accounts; set callers.kubernetes.jwksTokenFile`;
  }
  const which = `the token of callers.kubernetes.jwksTokenFile (fingerprint ${fingerprint(sent)})`;
  return status === 401
    ? `the JWKS server answered 401 to ${which}: not valid there (expired, or not its audience)`
    : `the JWKS server answered 403 to ${which}: its identity may not read the keys (ClusterRole system:service-account-issuer-discovery)`;
}
