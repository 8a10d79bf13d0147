/**
 * A valid `ConfigFile` (schema + semantic checks passed) → the runtime `ProxyConfig`: defaults
 * applied, durations in ms, sizes in bytes, file paths absolute, header names lowercase, token
 * URLs and version headers derived.
 */
import { availableParallelism } from "node:os";
import { isAbsolute, resolve } from "node:path";
import { DEFAULT_ACCEPT_TOKEN_TYPES } from "./accept-token-types.js";
import { DEFAULT_API_VERSION, KNOWN_API_VERSIONS, resolveApiVersion } from "./api-versions.js";
import { type IssuePath, toPointer } from "./issues.js";
import type {
  AllowRule,
  CallersConfig,
  ListenSpec,
  ProxyConfig,
  SecretSource,
  TokenEndpointSpec,
  TokenPolicy,
  UpstreamConfig,
  UpstreamTls,
} from "./proxy-config.js";
import { readinessConfig } from "./readiness-defaults.js";
import { normalizeSentinel } from "./redis-topology.js";
import type { ConfigFile, UpstreamConfigFile } from "./schema.js";
import { parseByteSize, parseDurationMs } from "./units.js";

/** Every default, in the file's own units; schema.ts documents each next to its field. */
export const DEFAULTS = {
  listen: { host: "127.0.0.1", port: 8080 },
  admin: { host: "127.0.0.1", port: 9901 },
  log: { level: "info", format: "json" },
  limits: {
    maxHeaderSize: "16KiB",
    maxHeaderCount: 100,
    maxUrlLength: "8KiB",
    headersTimeout: "10s",
    keepAliveTimeout: "5s",
    maxConnections: 10_000,
    maxPipelinedRequests: 16,
    maxRequestBodySize: "1GiB",
    minRequestBodyRate: 240,
    minResponseRate: 240,
    minDataRateGrace: "5s",
    maxInFlight: 4096,
    maxUpgrades: 1024,
    sustainedOverload: "10s",
    maxWaiting: 10_000,
    maxWaitingPerCaller: 1_000,
  },
  paths: { mergeSlashes: true, escapedSlashes: "reject" },
  shutdown: { drainDelay: "5s", timeout: "30s" },
  callers: {
    /** `maxConcurrentChecks` defaults to {@link defaultMaxConcurrentChecks} (the machine's cores). */
    basic: { maxQueuedChecks: 100 },
    kubernetes: { audiences: ["bearer-proxy"] as readonly string[] },
  },
  tokenCache: {
    maxSources: 20_000,
    eagerLimit: 100,
    redis: { keyPrefix: "bearer-proxy:", lockTtl: "15s", commandTimeout: "500ms" },
  },
  upstream: {
    apiVersion: DEFAULT_API_VERSION,
    tokenRequestFormat: "form",
    clientAuth: "body",
    basicEncoding: "form",
    assertion: { lifetime: "60s" },
    match: { pathPrefix: "/", hosts: [] as readonly string[] },
    /** Host of an upstream's own listener when it names only a port. */
    listenHost: "127.0.0.1",
    stripPrefix: false,
    allowInsecureHttp: false,
    clientCredentials: "strip",
    forwardedHeaders: false,
    replayBodyLimit: "1MiB",
    connections: 128,
    maxResponseHeaderSize: "64KiB",
    timeouts: {
      connect: "10s",
      responseHeaders: "30s",
      bodyIdle: "60s",
      idleConnection: "4s",
      queue: "5s",
      upgradeIdle: "10m",
    },
    upgrades: ["websocket"] as readonly string[],
    http2: false,
    rateLimit: {
      per: "1s",
      burst: 0,
      by: "upstream",
      scope: "local",
      wait: "10s",
      pauseScope: "upstream",
      maxPause: "60s",
    } as const,
    retry: { attempts: 1, on: ["connect", "reset"] as const, budget: "20%" },
    intercept: false,
    token: {
      defaultExpiresIn: "600s",
      refreshWindow: [0.75, 0.85] as const,
      timeout: "10s",
      waitTimeout: "5s",
      minAgeBeforeInvalidate: "2s",
      minRefreshInterval: "1s",
      initialBackoff: "1s",
      maxBackoff: "30s",
      prefetch: true,
    },
  },
} as const;

/**
 * `callers.basic.maxConcurrentChecks` when unset: one less than the cores this process may use,
 * at least 1, so a flood of password checks leaves a core to the event loop that serves everyone.
 */
export function defaultMaxConcurrentChecks(cores = availableParallelism()): number {
  return Math.max(1, cores - 1);
}

/** Where relative paths are resolved from, and which values came from env/flags. */
export interface PathContext {
  /** Folder of the config file (cwd without one): base of paths written in the file. */
  baseDir: string;
  /** Base of paths given by env variables and flags. */
  cwd: string;
  /** JSON pointer → env variable / flag that set it. */
  provenance: ReadonlyMap<string, string>;
}

/** Absolute form of a file path found at `path` in the document. */
export function resolveFilePath(path: IssuePath, value: string, ctx: PathContext): string {
  if (isAbsolute(value)) return resolve(value);
  return resolve(ctx.provenance.has(toPointer(path)) ? ctx.cwd : ctx.baseDir, value);
}

/**
 * A host entry as the router compares it: lowercase `host:port`, port 80 when none is given
 * (plain-HTTP clients omit it).
 */
export function normalizeHostEntry(entry: string): string {
  const lower = entry.toLowerCase();
  return /:[0-9]+$/.test(lower) ? lower : `${lower}:80`;
}

/** Build the runtime config. The input must have passed validation; the result is not frozen. */
export function normalizeConfig(file: ConfigFile, ctx: PathContext): ProxyConfig {
  const limits = file.limits ?? {};
  const shutdown = file.shutdown ?? {};
  const cache = file.tokenCache ?? {};
  const D = DEFAULTS;
  const upstreams = file.upstreams.map((u, i) => normalizeUpstream(u, ["upstreams", i], ctx));
  return {
    listen: listenSpec(file.listen, D.listen),
    admin: listenSpec(file.admin, D.admin),
    log: {
      // schema.ts builds the level union from a string array, so its static type is `string`.
      level: (file.log?.level ?? D.log.level) as ProxyConfig["log"]["level"],
      format: file.log?.format ?? D.log.format,
    },
    egressProxy: file.egressProxy,
    limits: {
      maxHeaderSizeBytes: parseByteSize(limits.maxHeaderSize ?? D.limits.maxHeaderSize),
      maxHeaderCount: limits.maxHeaderCount ?? D.limits.maxHeaderCount,
      maxUrlLengthBytes: parseByteSize(limits.maxUrlLength ?? D.limits.maxUrlLength),
      headersTimeoutMs: parseDurationMs(limits.headersTimeout ?? D.limits.headersTimeout),
      keepAliveTimeoutMs: parseDurationMs(limits.keepAliveTimeout ?? D.limits.keepAliveTimeout),
      maxConnections: limits.maxConnections ?? D.limits.maxConnections,
      maxPipelinedRequests: limits.maxPipelinedRequests ?? D.limits.maxPipelinedRequests,
      maxRequestBodySizeBytes: parseByteSize(
        limits.maxRequestBodySize ?? D.limits.maxRequestBodySize,
      ),
      minRequestBodyRate: limits.minRequestBodyRate ?? D.limits.minRequestBodyRate,
      minResponseRate: limits.minResponseRate ?? D.limits.minResponseRate,
      minDataRateGraceMs: parseDurationMs(limits.minDataRateGrace ?? D.limits.minDataRateGrace),
      maxInFlight: limits.maxInFlight ?? D.limits.maxInFlight,
      maxUpgrades: limits.maxUpgrades ?? D.limits.maxUpgrades,
      sustainedOverloadMs: parseDurationMs(limits.sustainedOverload ?? D.limits.sustainedOverload),
      maxWaiting: limits.maxWaiting ?? D.limits.maxWaiting,
      maxWaitingPerCaller: limits.maxWaitingPerCaller ?? D.limits.maxWaitingPerCaller,
    },
    paths: {
      mergeSlashes: file.paths?.mergeSlashes ?? D.paths.mergeSlashes,
      escapedSlashes: file.paths?.escapedSlashes ?? D.paths.escapedSlashes,
    },
    shutdown: {
      drainDelayMs: parseDurationMs(shutdown.drainDelay ?? D.shutdown.drainDelay),
      timeoutMs: parseDurationMs(shutdown.timeout ?? D.shutdown.timeout),
    },
    tokenCache: {
      redis: cache.redis && {
        url: cache.redis.url,
        clusterNodes: cache.redis.clusterNodes,
        sentinel: cache.redis.sentinel && normalizeSentinel(cache.redis.sentinel),
        keyPrefix: cache.redis.keyPrefix ?? D.tokenCache.redis.keyPrefix,
        lockTtlMs: parseDurationMs(cache.redis.lockTtl ?? D.tokenCache.redis.lockTtl),
        commandTimeoutMs: parseDurationMs(
          cache.redis.commandTimeout ?? D.tokenCache.redis.commandTimeout,
        ),
      },
      maxSources: cache.maxSources ?? D.tokenCache.maxSources,
      eagerLimit: cache.eagerLimit ?? D.tokenCache.eagerLimit,
    },
    readiness: readinessConfig(file.readiness?.requireTokens, upstreams),
    callers: callersConfig(file.callers, ctx),
    tracing: { exporter: file.tracing?.exporter },
    intercept: file.intercept && {
      caCertFile: resolveFilePath(["intercept", "caCertFile"], file.intercept.caCertFile, ctx),
      caKeyFile: resolveFilePath(["intercept", "caKeyFile"], file.intercept.caKeyFile, ctx),
    },
    upstreams,
  };
}

function callersConfig(given: ConfigFile["callers"], ctx: PathContext): CallersConfig {
  const basic = given?.basic;
  const k8s = given?.kubernetes;
  const file = (path: IssuePath, value: string | undefined) =>
    value === undefined ? undefined : resolveFilePath(path, value, ctx);
  return {
    basic: basic && {
      usersFile: resolveFilePath(["callers", "basic", "usersFile"], basic.usersFile, ctx),
      maxConcurrentChecks: basic.maxConcurrentChecks ?? defaultMaxConcurrentChecks(),
      maxQueuedChecks: basic.maxQueuedChecks ?? DEFAULTS.callers.basic.maxQueuedChecks,
    },
    kubernetes: k8s && {
      issuer: k8s.issuer,
      audiences: [...(k8s.audiences ?? DEFAULTS.callers.kubernetes.audiences)],
      jwksFile: file(["callers", "kubernetes", "jwksFile"], k8s.jwksFile),
      jwksUri: k8s.jwksUri,
      caFile: file(["callers", "kubernetes", "caFile"], k8s.caFile),
      jwksTokenFile: file(["callers", "kubernetes", "jwksTokenFile"], k8s.jwksTokenFile),
    },
  };
}

function listenSpec(
  given: { host?: string; port?: number } | undefined,
  fallback: ListenSpec,
): ListenSpec {
  return { host: given?.host ?? fallback.host, port: given?.port ?? fallback.port };
}

function normalizeUpstream(u: UpstreamConfigFile, at: IssuePath, ctx: PathContext): UpstreamConfig {
  const D = DEFAULTS.upstream;
  const url = new URL(u.baseUrl);
  const basePath = url.pathname.replace(/\/+$/, "");
  const apiVersion = u.apiVersion ?? D.apiVersion;
  // Unknown versions without tokenPath are only valid with tokenUrl (checked earlier).
  const version = resolveApiVersion(apiVersion, u.tokenPath);
  const versionHeader = version ? version.versionHeader : apiVersion;
  const tokenUrl = u.tokenUrl
    ? new URL(u.tokenUrl).href
    : `${url.origin}${basePath}${version?.tokenPath ?? ""}`;
  const file = (key: string, value: string | undefined, prefix: IssuePath = at) =>
    value === undefined ? undefined : resolveFilePath([...prefix, key], value, ctx);
  const tlsAt = [...at, "tls"];
  const tls: UpstreamTls = {
    caFile: file("caFile", u.tls?.caFile, tlsAt),
    certFile: file("certFile", u.tls?.certFile, tlsAt),
    keyFile: file("keyFile", u.tls?.keyFile, tlsAt),
    serverName: u.tls?.serverName,
  };
  const allowInsecureHttp = u.allowInsecureHttp ?? D.allowInsecureHttp;
  const timeouts = u.timeouts ?? {};
  return {
    name: u.name,
    baseUrl: `${url.origin}${basePath}`,
    origin: url.origin,
    basePath,
    apiVersion,
    versionHeader,
    token: {
      tokenUrl,
      versionHeader,
      format: u.tokenRequestFormat ?? D.tokenRequestFormat,
      ...clientAuthSpec(u, file),
      clientId: secretSource(u.clientId, file("clientIdFile", u.clientIdFile)),
      clientSecret: optionalSecretSource(
        u.clientSecret,
        file("clientSecretFile", u.clientSecretFile),
      ),
      scope: u.scope,
      extraParams: { ...u.tokenParams },
      extraHeaders: lowercaseKeys(u.tokenHeaders),
      tls: u.tokenTls
        ? tlsSettings(u.tokenTls, [...at, "tokenTls"], ctx)
        : // serverName names the upstream's host: a token endpoint elsewhere is verified as itself.
          new URL(tokenUrl).origin === url.origin
          ? tls
          : { ...tls, serverName: undefined },
      allowInsecureHttp,
      acceptTokenTypes: [...(u.token?.acceptTokenTypes ?? DEFAULT_ACCEPT_TOKEN_TYPES)],
      dpop: u.dpop && {
        keyFile: file("keyFile", u.dpop.keyFile, [...at, "dpop"]),
        algorithm: u.dpop.algorithm,
      },
    },
    tokenPolicy: tokenPolicy(u.token),
    tls,
    match: {
      pathPrefix: u.match?.pathPrefix ?? D.match.pathPrefix,
      hosts: (u.match?.hosts ?? D.match.hosts).map(normalizeHostEntry),
    },
    stripPrefix: u.stripPrefix ?? D.stripPrefix,
    listen: u.listen && listenSpec(u.listen, { host: D.listenHost, port: 0 }),
    allowInsecureHttp,
    clientCredentials: u.clientCredentials ?? D.clientCredentials,
    forwardedHeaders: u.forwardedHeaders ?? D.forwardedHeaders,
    headers: lowercaseKeys(u.headers),
    replayBodyLimitBytes: parseByteSize(u.replayBodyLimit ?? D.replayBodyLimit),
    connections: u.connections ?? D.connections,
    maxResponseHeaderSizeBytes: parseByteSize(u.maxResponseHeaderSize ?? D.maxResponseHeaderSize),
    timeouts: {
      connectMs: parseDurationMs(timeouts.connect ?? D.timeouts.connect),
      responseHeadersMs: parseDurationMs(timeouts.responseHeaders ?? D.timeouts.responseHeaders),
      bodyIdleMs: parseDurationMs(timeouts.bodyIdle ?? D.timeouts.bodyIdle),
      idleConnectionMs: parseDurationMs(timeouts.idleConnection ?? D.timeouts.idleConnection),
      queueMs: parseDurationMs(timeouts.queue ?? D.timeouts.queue),
      upgradeIdleMs: parseDurationMs(timeouts.upgradeIdle ?? D.timeouts.upgradeIdle),
    },
    maxRequestBodySizeBytes:
      u.maxRequestBodySize === undefined ? undefined : parseByteSize(u.maxRequestBodySize),
    upgrades: (u.upgrades ?? D.upgrades).map((name) => name.toLowerCase()),
    http2: u.http2 ?? D.http2,
    allow: u.allow?.map((rule) => ({ ...rule }) as AllowRule),
    rateLimit:
      u.rateLimit?.requests === undefined
        ? undefined
        : {
            requests: u.rateLimit.requests,
            perMs: parseDurationMs(u.rateLimit.per ?? D.rateLimit.per),
            burst: u.rateLimit.burst ?? D.rateLimit.burst,
            by: u.rateLimit.by ?? D.rateLimit.by,
            scope: u.rateLimit.scope ?? D.rateLimit.scope,
            waitMs: parseDurationMs(u.rateLimit.wait ?? D.rateLimit.wait),
          },
    pause: {
      scope: u.rateLimit?.pauseScope ?? D.rateLimit.pauseScope,
      maxPauseMs: parseDurationMs(u.rateLimit?.maxPause ?? D.rateLimit.maxPause),
      waitMs: parseDurationMs(u.rateLimit?.wait ?? D.rateLimit.wait),
    },
    retry: {
      attempts: u.retry?.attempts ?? D.retry.attempts,
      on: [...(u.retry?.on ?? D.retry.on)],
      budgetPercent: Number.parseFloat(u.retry?.budget ?? D.retry.budget),
    },
    intercept: u.intercept ?? D.intercept,
  };
}

function tokenPolicy(t: UpstreamConfigFile["token"] = {}): TokenPolicy {
  const D = DEFAULTS.upstream.token;
  const window = t.refreshWindow ?? D.refreshWindow;
  return {
    defaultExpiresInMs: parseDurationMs(t.defaultExpiresIn ?? D.defaultExpiresIn),
    refreshWindow: [window[0], window[1]],
    requestTimeoutMs: parseDurationMs(t.timeout ?? D.timeout),
    waitTimeoutMs: parseDurationMs(t.waitTimeout ?? D.waitTimeout),
    minAgeBeforeInvalidateMs: parseDurationMs(t.minAgeBeforeInvalidate ?? D.minAgeBeforeInvalidate),
    minRefreshIntervalMs: parseDurationMs(t.minRefreshInterval ?? D.minRefreshInterval),
    initialBackoffMs: parseDurationMs(t.initialBackoff ?? D.initialBackoff),
    maxBackoffMs: parseDurationMs(t.maxBackoff ?? D.maxBackoff),
    prefetch: t.prefetch ?? D.prefetch,
    prefetchExplicit: t.prefetch !== undefined,
  };
}

function secretSource(inline: string | undefined, filePath: string | undefined): SecretSource {
  const source = optionalSecretSource(inline, filePath);
  if (source) return source;
  throw new TypeError("credential without a value or file (validation should have caught this)");
}

function optionalSecretSource(
  inline: string | undefined,
  filePath: string | undefined,
): SecretSource | undefined {
  if (inline !== undefined) return { kind: "inline", value: inline };
  if (filePath !== undefined) return { kind: "file", path: filePath };
  return undefined;
}

function tlsSettings(
  given: NonNullable<UpstreamConfigFile["tls"]>,
  at: IssuePath,
  ctx: PathContext,
): UpstreamTls {
  const file = (key: "caFile" | "certFile" | "keyFile") =>
    given[key] === undefined ? undefined : resolveFilePath([...at, key], given[key], ctx);
  return {
    caFile: file("caFile"),
    certFile: file("certFile"),
    keyFile: file("keyFile"),
    serverName: given.serverName,
  };
}

/** The client-authentication part of the token spec; method settings only for their method. */
function clientAuthSpec(
  u: UpstreamConfigFile,
  file: (key: string, value: string | undefined) => string | undefined,
): Pick<
  TokenEndpointSpec,
  "clientAuth" | "basicEncoding" | "privateKeyJwt" | "clientAssertionFile"
> {
  const D = DEFAULTS.upstream;
  const clientAuth = u.clientAuth ?? D.clientAuth;
  const keyFile = file("clientKeyFile", u.clientKeyFile);
  return {
    clientAuth,
    basicEncoding: u.basicEncoding ?? D.basicEncoding,
    privateKeyJwt:
      clientAuth === "private-key-jwt" && keyFile !== undefined
        ? {
            keyFile,
            keyId: u.clientKeyId,
            certificateFile: file("clientCertificateFile", u.clientCertificateFile),
            audience: u.assertion?.audience,
            lifetimeMs: parseDurationMs(u.assertion?.lifetime ?? D.assertion.lifetime),
            algorithm: u.assertion?.algorithm,
          }
        : undefined,
    clientAssertionFile:
      clientAuth === "client-assertion-file"
        ? file("clientAssertionFile", u.clientAssertionFile)
        : undefined,
  };
}

function lowercaseKeys(record: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(record ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
}

/** Freeze an object graph (the runtime config is read-only everywhere). */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

/** Known version names, for messages. */
export const KNOWN_VERSION_NAMES: readonly string[] = Object.keys(KNOWN_API_VERSIONS);
