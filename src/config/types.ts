/**
 * The runtime configuration: what `loadConfig` returns after validating a `ConfigFile`
 * (schema.ts), applying defaults, converting durations to ms and sizes to bytes, and deriving
 * token URLs from the API version. Frozen; everything downstream reads only this.
 */

export interface ListenSpec {
  host: string;
  port: number;
}

/** Where a credential's value comes from; files are re-read when they change (rotation). */
export type SecretSource = { kind: "inline"; value: string } | { kind: "file"; path: string };

export interface UpstreamTls {
  caFile: string | undefined;
  certFile: string | undefined;
  keyFile: string | undefined;
  serverName: string | undefined;
}

export interface TokenPolicy {
  defaultExpiresInMs: number;
  /** Refresh point as a fraction of lifetime, drawn uniformly in [min, max]. */
  refreshWindow: readonly [number, number];
  requestTimeoutMs: number;
  waitTimeoutMs: number;
  minAgeBeforeInvalidateMs: number;
  minRefreshIntervalMs: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  /** Fetch at start (default true, within `tokenCache.eagerLimit`); false: on first use. */
  prefetch: boolean;
  /** True when the file sets `token.prefetch`: the value then wins over `tokenCache.eagerLimit`. */
  prefetchExplicit: boolean;
}

/** Everything needed to ask the token endpoint for a token. */
export interface TokenEndpointSpec {
  /** Full token endpoint URL. */
  tokenUrl: string;
  /** X-Version header sent on token requests, or undefined for none. */
  versionHeader: string | undefined;
  format: "form" | "json";
  clientAuth: "body" | "basic";
  clientId: SecretSource;
  clientSecret: SecretSource;
  scope: string | undefined;
  extraParams: Readonly<Record<string, string>>;
  extraHeaders: Readonly<Record<string, string>>;
  tls: UpstreamTls;
  allowInsecureHttp: boolean;
}

export interface UpstreamConfig {
  name: string;
  /** Normalised base URL without a trailing slash. */
  baseUrl: string;
  /** Origin (scheme://host:port) of baseUrl. */
  origin: string;
  /** Path part of baseUrl without trailing slash ("" for none); prefixed to forwarded paths. */
  basePath: string;
  /** "default", "scripting-preview" or the literal X-Version value given. */
  apiVersion: string;
  /** X-Version injected on API requests, or undefined (default version sends none). */
  versionHeader: string | undefined;
  token: TokenEndpointSpec;
  tokenPolicy: TokenPolicy;
  tls: UpstreamTls;
  match: { pathPrefix: string; hosts: readonly string[] };
  stripPrefix: boolean;
  listen: ListenSpec | undefined;
  allowInsecureHttp: boolean;
  clientCredentials: "strip" | "reject";
  forwardedHeaders: boolean;
  headers: Readonly<Record<string, string>>;
  replayBodyLimitBytes: number;
  connections: number;
  timeouts: {
    connectMs: number;
    responseHeadersMs: number;
    bodyIdleMs: number;
    idleConnectionMs: number;
  };
}

export interface LimitsConfig {
  maxHeaderSizeBytes: number;
  maxHeaderCount: number;
  maxUrlLengthBytes: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
}

export interface RedisCacheConfig {
  url: string;
  keyPrefix: string;
  lockTtlMs: number;
  commandTimeoutMs: number;
}

/** Which upstreams' tokens readiness waits for (schema.ts `Readiness`). */
export type RequireTokens = "all" | "prefetched" | "none";

export interface ReadinessConfig {
  requireTokens: RequireTokens;
  /** "config" when the file set it, else the shape that chose the default. */
  chosenBy: "config" | "one-client" | "several-clients";
}

export interface ProxyConfig {
  listen: ListenSpec;
  admin: ListenSpec;
  log: {
    level: "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
    format: "json" | "pretty";
  };
  egressProxy: string | undefined;
  limits: LimitsConfig;
  shutdown: { drainDelayMs: number; timeoutMs: number };
  tokenCache: { redis: RedisCacheConfig | undefined; maxSources: number; eagerLimit: number };
  readiness: ReadinessConfig;
  upstreams: readonly UpstreamConfig[];
}
