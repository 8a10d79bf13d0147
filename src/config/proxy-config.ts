/**
 * The runtime configuration: what `loadConfig` returns after validating a `ConfigFile`
 * (schema.ts), applying defaults, converting durations to ms and sizes to bytes, and deriving
 * token URLs from the API version. Frozen; everything downstream reads only this.
 */

import type { EscapedSlashes, PathRules } from "../base/path-normalization.js";
import type { JwsAlgorithm } from "../base/private-key.js";
import type { RedisSentinelTarget, RedisTarget } from "../base/redis-clients.js";

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

/** How the proxy authenticates to the token endpoint (setting `clientAuth`; see token/client-auth/). */
export type ClientAuthMethod =
  | "body"
  | "basic"
  | "private-key-jwt"
  | "client-assertion-file"
  | "tls-client-auth";

/** Signing algorithms of `private-key-jwt` assertions (RFC 7518 §3, RFC 8037). */
export type AssertionAlgorithm = JwsAlgorithm;

/** `clientAuth: private-key-jwt`: the key and the assertion it signs (RFC 7523 §2.2). */
export interface PrivateKeyJwtSpec {
  /** PEM private key (PKCS#8, PKCS#1 or SEC1); re-read when it changes. */
  keyFile: string;
  /** `kid` header, or undefined for none. */
  keyId: string | undefined;
  /** PEM certificate of the key: its SHA-256 thumbprint goes into `x5t#S256` (Entra ID). */
  certificateFile: string | undefined;
  /** `aud` claim; undefined means the token endpoint URL. */
  audience: string | undefined;
  /** `exp` - `iat`. */
  lifetimeMs: number;
  /** undefined: inferred from the key (RSA → RS256, P-256 → ES256, Ed25519 → EdDSA). */
  algorithm: AssertionAlgorithm | undefined;
}

/** Everything needed to ask the token endpoint for a token. */
export interface TokenEndpointSpec {
  /** Full token endpoint URL. */
  tokenUrl: string;
  /** X-Version header sent on token requests, or undefined for none. */
  versionHeader: string | undefined;
  format: "form" | "json";
  clientAuth: ClientAuthMethod;
  /** `basic` only: form-encode id and secret (RFC 6749 §2.3.1) or send them raw. */
  basicEncoding: "form" | "raw";
  clientId: SecretSource;
  /** The secret of `body` and `basic`; undefined for the secretless methods. */
  clientSecret: SecretSource | undefined;
  /** Set for `private-key-jwt` only. */
  privateKeyJwt: PrivateKeyJwtSpec | undefined;
  /** `client-assertion-file` only: file holding a pre-signed JWT, read before every request. */
  clientAssertionFile: string | undefined;
  scope: string | undefined;
  extraParams: Readonly<Record<string, string>>;
  extraHeaders: Readonly<Record<string, string>>;
  /** TLS towards the token endpoint (`tokenTls`, else the upstream's `tls`); tls-client-auth's certificate. */
  tls: UpstreamTls;
  allowInsecureHttp: boolean;
  /** `token_type` values accepted as Bearer (from `token.acceptTokenTypes`; default ["Bearer"]). */
  acceptTokenTypes: readonly string[];
  /** DPoP (RFC 9449): proofs on the token request and every upstream request; undefined: off. */
  dpop: DpopSpec | undefined;
}

/** `upstreams[].dpop`. */
export interface DpopSpec {
  /** Absolute path of a PEM key shared by replicas; undefined: an ephemeral key per process (of `algorithm`, default P-256/ES256). */
  keyFile: string | undefined;
  /** undefined: inferred from the key. */
  algorithm: "ES256" | "PS256" | "RS256" | "EdDSA" | undefined;
}

/** `upstreams[].rateLimit` with `requests` (schema.ts `RateLimitSettings`): our own limit. */
export interface RateLimitConfig {
  requests: number;
  perMs: number;
  burst: number;
  by: "upstream" | "caller";
  scope: "local" | "shared";
  waitMs: number;
}

/** How an upstream's "slow down" (429/503 with Retry-After) holds its requests (`rateLimit.pauseScope` …). */
export interface PauseConfig {
  /** `upstream`: the answer pauses this entry; `credential`: every entry spending its credential at its origin. */
  scope: "upstream" | "credential";
  /** Longest pause one answer imposes (0: none). */
  maxPauseMs: number;
  /** Longest a request waits out a pause (`rateLimit.wait`). */
  waitMs: number;
}

/** What an upstream retries after a failure before any response byte was relayed. */
export type RetryTrigger = "connect" | "reset" | "502" | "503" | "504";

/** `upstreams[].retry` (schema.ts `RetrySettings`). */
export interface RetryConfig {
  /** Extra attempts (0: none). */
  attempts: number;
  on: readonly RetryTrigger[];
  /** Retries stay below this share of requests over 10 s. */
  budgetPercent: number;
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
  /** Largest response header block from the upstream (undici maxHeaderSize); beyond: 502. */
  maxResponseHeaderSizeBytes: number;
  timeouts: {
    connectMs: number;
    responseHeadersMs: number;
    bodyIdleMs: number;
    idleConnectionMs: number;
    /** Longest wait for a free pooled connection (then 503 upstream_busy). */
    queueMs: number;
    /** Longest silence on an upgraded (WebSocket) connection. */
    upgradeIdleMs: number;
  };
  /** Largest request body for this upstream (0: none); undefined: `limits.maxRequestBodySizeBytes`. */
  maxRequestBodySizeBytes: number | undefined;
  /** Upgrade protocols relayed, lowercase (see schema.ts `upgrades`). */
  upgrades: readonly string[];
  /** Offer HTTP/2 to the upstream (ALPN). */
  http2: boolean;
  /** Who may use this upstream (ORed); undefined: anyone who reaches the listener. */
  allow: readonly AllowRule[] | undefined;
  /** Pacing; undefined: none. */
  rateLimit: RateLimitConfig | undefined;
  /** The upstream's own pauses (every upstream has them, with or without `rateLimit`). */
  pause: PauseConfig;
  retry: RetryConfig;
  /**
   * CONNECT to baseUrl's authority is terminated with a leaf of `ProxyConfig.intercept`'s CA and
   * every request inside goes here (base/authority.ts `interceptRoutes`).
   */
  intercept: boolean;
}

/** `intercept`: the CA of the leaf certificates (absolute paths; checked at load, config/intercept-ca.ts). */
export interface InterceptConfig {
  caCertFile: string;
  caKeyFile: string;
}

/**
 * One `upstreams[].allow` rule (schema.ts `AllowRule`): exactly one key; a list's rules are ORed.
 * `cidr` matches the TCP peer's address, `user` a `callers.basic` user, `serviceAccount`
 * `namespace/name` (the name may be `*`), `namespace: ns` is `serviceAccount: ns/*`.
 */
export type AllowRule =
  | { cidr: string }
  | { user: string }
  | { serviceAccount: string }
  | { namespace: string };

/** `callers.basic`: users with bcrypt passwords. */
export interface BasicCallersConfig {
  /** Absolute path of the htpasswd file (`htpasswd -B`: bcrypt hashes only); re-read on change. */
  usersFile: string;
  /**
   * Password checks (bcrypt, on libuv's thread pool) running at once in the process. Default:
   * one less than the CPU cores (`os.availableParallelism()`), at least 1 — the event loop keeps
   * a core. At most `UV_THREADPOOL_SIZE` − 1 run whatever this says.
   */
  maxConcurrentChecks: number;
  /** Checks waiting for a slot; beyond, 503 `caller_checks_busy`. Default 100. */
  maxQueuedChecks: number;
}

/** `callers.kubernetes`: projected service-account tokens verified against the cluster's JWKS. */
export interface KubernetesCallersConfig {
  /** The token's `iss` must equal this. */
  issuer: string;
  /** The token's `aud` must contain one of these. Default ["bearer-proxy"]. */
  audiences: readonly string[];
  /**
   * The cluster's JWKS as a file (`kubectl get --raw /openid/v1/jwks`; absolute path); re-read
   * on change. Exactly one of `jwksFile` and `jwksUri`.
   */
  jwksFile?: string | undefined;
  /** The cluster's JWKS URL (https); refetched on an unknown `kid`. */
  jwksUri?: string | undefined;
  /** Extra CA (PEM, absolute path) trusted for `jwksUri`, besides the system roots. */
  caFile?: string | undefined;
  /**
   * A file holding a bearer token sent as `Authorization: Bearer` on every `jwksUri` fetch
   * (absolute path), re-read at each fetch: the API server's `/openid/v1/jwks` is readable by
   * authenticated service accounts, e.g. with `/var/run/secrets/kubernetes.io/serviceaccount/token`.
   * Only with `jwksUri`. Default: none (the fetch is anonymous).
   */
  jwksTokenFile?: string | undefined;
}

/** `callers` (schema.ts `Callers`): the identity sources; an absent one is `not_configured`. */
export interface CallersConfig {
  basic?: BasicCallersConfig | undefined;
  kubernetes?: KubernetesCallersConfig | undefined;
}

export interface LimitsConfig {
  maxHeaderSizeBytes: number;
  maxHeaderCount: number;
  maxUrlLengthBytes: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
  /** Requests queued behind the one in flight per connection before reading stops. */
  maxPipelinedRequests: number;
  /** Largest request body (0: none). */
  maxRequestBodySizeBytes: number;
  /** Bytes per second (0: off). */
  minRequestBodyRate: number;
  /** Bytes per second (0: off). */
  minResponseRate: number;
  minDataRateGraceMs: number;
  /** Requests handled at once by the process (0: no limit). */
  maxInFlight: number;
  /** Upgraded connections open at once, incl. those awaiting the 101 (0: no limit). */
  maxUpgrades: number;
  /** Requests waiting for a pacing turn or a pause, all together (not in maxInFlight). */
  maxWaiting: number;
  /** Requests of one caller waiting, over every upstream. */
  maxWaitingPerCaller: number;
  /** Refusing over maxInFlight this long makes /readyz fail. */
  sustainedOverloadMs: number;
}

/** What an encoded slash (`%2F`) in a request path becomes (schema.ts `Paths`). */
export type { EscapedSlashes };

/** `paths` (schema.ts `Paths`): how request paths are normalized before routing. */
export type PathsConfig = PathRules;

/** Redis behind Sentinel (tokenCache.redis.sentinel); sentinel ports default to 26379. */
export type RedisSentinelConfig = RedisSentinelTarget;

/** The shared cache's Redis: exactly one of url, clusterNodes and sentinel is set. */
export interface RedisCacheConfig extends RedisTarget {
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
  paths: PathsConfig;
  shutdown: { drainDelayMs: number; timeoutMs: number };
  tokenCache: { redis: RedisCacheConfig | undefined; maxSources: number; eagerLimit: number };
  readiness: ReadinessConfig;
  callers: CallersConfig;
  /** OpenTelemetry: "otlp" when the file says so (env OTEL_TRACES_EXPORTER decides otherwise). */
  tracing: { exporter: "otlp" | "none" | undefined };
  /** CONNECT termination for `intercept: true` upstreams; undefined: off (CONNECT answers 405). */
  intercept: InterceptConfig | undefined;
  upstreams: readonly UpstreamConfig[];
}
