/**
 * The configuration file's schema: one TypeBox schema gives both validation (ajv) and the
 * `ConfigFile` type. Every field documents its default here; `normalize.ts` turns a valid file
 * into the frozen runtime `ProxyConfig` (durations in ms, sizes in bytes, token URLs derived).
 */
import { type Static, Type as T } from "@sinclair/typebox";
import { DURATION_PATTERN } from "./units.js";

/** `"250ms"`, `"5s"`, `"2m"`, `"1h"`, or a whole number of milliseconds. */
export const Duration = T.Union(
  [T.String({ pattern: DURATION_PATTERN }), T.Integer({ minimum: 0 })],
  {
    description: 'a duration such as "500ms", "5s", "2m", "1h" or whole milliseconds',
  },
);

/** `"64KiB"`, `"1MiB"`, `"512B"`, or a whole number of bytes. */
export const ByteSize = T.Union(
  [T.String({ pattern: "^[0-9]+(B|KiB|MiB|GiB|KB|MB|GB)$" }), T.Integer({ minimum: 0 })],
  {
    description: 'a size such as "64KiB", "1MiB" or whole bytes',
  },
);

const Port = T.Integer({
  minimum: 0,
  maximum: 65535,
  description: "a TCP port (0 picks a free one)",
});
const Host = T.String({ minLength: 1, description: "an interface address or host name" });

export const ListenAddress = T.Object(
  {
    /** Interface to bind. Default 127.0.0.1 (a sidecar listens on loopback only). */
    host: T.Optional(Host),
    /** Port to bind. Default 8080 for the proxy, 9901 for admin. */
    port: T.Optional(Port),
  },
  { additionalProperties: false },
);

const HeaderName = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

export const TlsSettings = T.Object(
  {
    /** Extra CA bundle (PEM) trusted for this upstream and its token endpoint, on top of system CAs. */
    caFile: T.Optional(T.String({ minLength: 1 })),
    /** Client certificate (PEM) for upstreams that require mTLS. Needs `keyFile`. */
    certFile: T.Optional(T.String({ minLength: 1 })),
    /** Private key (PEM) for `certFile`. */
    keyFile: T.Optional(T.String({ minLength: 1 })),
    /**
     * Server name for SNI and certificate checks, when it differs from baseUrl's host. Applies to
     * the token endpoint only when it is on baseUrl's origin (a `tokenUrl` elsewhere is checked
     * against its own host).
     */
    serverName: T.Optional(T.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);

export const MatchRules = T.Object(
  {
    /** Requests whose path starts with this prefix go to this upstream (longest prefix wins). Default "/". */
    pathPrefix: T.Optional(T.String({ pattern: "^/", description: 'a path starting with "/"' })),
    /** Requests whose Host (or absolute-form URL authority) is one of these go to this upstream. `host` or `host:port`. */
    hosts: T.Optional(
      T.Array(T.String({ minLength: 1, pattern: "^[A-Za-z0-9.-]+(:[0-9]{1,5})?$" }), {
        uniqueItems: true,
      }),
    ),
  },
  { additionalProperties: false },
);

export const TokenSettings = T.Object(
  {
    /** Lifetime assumed when the token response has no `expires_in`. Default "600s". */
    defaultExpiresIn: T.Optional(Duration),
    /** Refresh point as a fraction of the lifetime, drawn uniformly in [min, max]. Default [0.75, 0.85]. */
    refreshWindow: T.Optional(
      T.Tuple([
        T.Number({ exclusiveMinimum: 0, maximum: 1 }),
        T.Number({ exclusiveMinimum: 0, maximum: 1 }),
      ]),
    ),
    /** Timeout of one token request. Default "10s". */
    timeout: T.Optional(Duration),
    /** How long a request waits for a token when none is usable before 503. Default "5s". */
    waitTimeout: T.Optional(Duration),
    /** A token younger than this is not dropped on an upstream 401 (avoids loops). Default "2s". */
    minAgeBeforeInvalidate: T.Optional(Duration),
    /** Minimum interval between two token requests for one credential. Default "1s". */
    minRefreshInterval: T.Optional(Duration),
    /** First retry delay after a failed token request; doubles up to `maxBackoff`. Default "1s". */
    initialBackoff: T.Optional(Duration),
    /** Largest retry delay. Default "30s". */
    maxBackoff: T.Optional(Duration),
    /**
     * Fetch the token at start instead of on first use. Default: true for the first
     * `tokenCache.eagerLimit` credentials in config order, lazy beyond; set, it wins over the limit.
     */
    prefetch: T.Optional(T.Boolean()),
    /**
     * `token_type` values accepted (case-insensitively) and sent as `Authorization: Bearer`.
     * Default ["Bearer"]; add a provider's own name for a bearer token (Apigee: "BearerToken").
     * DPoP, N_A, MAC and PoP are never accepted: they are not bearer tokens.
     */
    acceptTokenTypes: T.Optional(
      T.Array(T.String({ minLength: 1, pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" }), {
        minItems: 1,
      }),
    ),
  },
  { additionalProperties: false },
);

export const Timeouts = T.Object(
  {
    /** TCP + TLS connect timeout to the upstream. Default "10s". */
    connect: T.Optional(Duration),
    /** Time to wait for the upstream's response headers. Default "30s". */
    responseHeaders: T.Optional(Duration),
    /** Longest silence while a response or request body is streaming. Default "60s". */
    bodyIdle: T.Optional(Duration),
    /**
     * How long an unused keep-alive connection to the upstream stays open, when the upstream
     * does not announce its own limit (`Keep-Alive: timeout=N` always wins). Default "4s".
     */
    idleConnection: T.Optional(Duration),
    /** Longest wait for a free pooled connection to the upstream; beyond: 503. Default "5s". */
    queue: T.Optional(Duration),
    /**
     * An upgraded connection (WebSocket) with no byte in either direction for this long is
     * closed on both sides. Default "10m".
     */
    upgradeIdle: T.Optional(Duration),
  },
  { additionalProperties: false },
);

/** `upstreams[].dpop`: sender-constrained tokens (RFC 9449). */
export const DpopSettings = T.Object(
  {
    /**
     * PEM private key shared by replicas (EC P-256, RSA ≥ 2048, Ed25519), re-read when it
     * changes. Default: a P-256 key made at start that never leaves the process.
     */
    keyFile: T.Optional(T.String({ minLength: 1 })),
    /** ES256 | PS256 | RS256 | EdDSA. Default: from the key (P-256 → ES256, RSA → RS256, Ed25519 → EdDSA); an ephemeral key is made for it (default ES256). */
    algorithm: T.Optional(
      T.Union([T.Literal("ES256"), T.Literal("PS256"), T.Literal("RS256"), T.Literal("EdDSA")]),
    ),
  },
  { additionalProperties: false },
);

/**
 * `upstreams[].rateLimit`: requests paced evenly (GCRA) before they reach the upstream, and how
 * the upstream's own "slow down" (a 429 or 503 with Retry-After) holds them.
 */
export const RateLimitSettings = T.Object(
  {
    /**
     * Requests allowed per `per`; at least 1. Without it there is no limit of our own: only
     * `pauseScope`, `maxPause` and `wait` may be given (how the upstream's pauses hold requests).
     */
    requests: T.Optional(T.Integer({ minimum: 1 })),
    /** The period of `requests`. Default "1s". */
    per: T.Optional(Duration),
    /** Extra requests that may go at once beyond even spacing. Default 0 (strictly even). */
    burst: T.Optional(T.Integer({ minimum: 0 })),
    /** `upstream` (one budget) or `caller` (one per caller identity, else peer address). Default "upstream". */
    by: T.Optional(T.Union([T.Literal("upstream"), T.Literal("caller")])),
    /** `local` (per replica) or `shared` (all replicas, through tokenCache.redis). Default "local". */
    scope: T.Optional(T.Union([T.Literal("local"), T.Literal("shared")])),
    /** Longest a request over the limit waits for its turn (in arrival order); 0 answers 429 at once. Default "10s". */
    wait: T.Optional(Duration),
    /**
     * Who an upstream's Retry-After (on a 429 or 503) pauses: `upstream`, this entry alone;
     * `credential`, every entry spending this entry's credential at its origin. Default "upstream".
     */
    pauseScope: T.Optional(T.Union([T.Literal("upstream"), T.Literal("credential")])),
    /**
     * Longest pause one Retry-After can impose (a longer one is cut to it); whole seconds, as
     * Retry-After counts; "0s": answers never pause this entry. Default "60s".
     */
    maxPause: T.Optional(Duration),
  },
  { additionalProperties: false },
);

/** `upstreams[].retry`: what is safe to send again (RFC 9110 §9.2.2). */
export const RetrySettings = T.Object(
  {
    /** Extra attempts for idempotent requests (or ones with Idempotency-Key); 0 disables. Default 1. */
    attempts: T.Optional(T.Integer({ minimum: 0, maximum: 5 })),
    /** Failures retried. Default ["connect", "reset"]. */
    on: T.Optional(
      T.Array(
        T.Union([
          T.Literal("connect"),
          T.Literal("reset"),
          T.Literal("502"),
          T.Literal("503"),
          T.Literal("504"),
        ]),
        { uniqueItems: true },
      ),
    ),
    /** Retries never exceed this share of requests over 10 s, e.g. "20%". Default "20%". */
    budget: T.Optional(T.String({ pattern: "^[0-9]+(\\.[0-9]+)?%$" })),
  },
  { additionalProperties: false },
);

/** One `allow` rule: exactly one of its keys. */
export const AllowRule = T.Object(
  {
    /** The TCP peer's address is in this block (`10.12.0.0/16`, `fd00::/8`, or one address). */
    cidr: T.Optional(T.String({ minLength: 1 })),
    /** A `callers.basic` user. */
    user: T.Optional(T.String({ minLength: 1, pattern: "^[^:\\s]+$" })),
    /** A Kubernetes service account, `namespace/name`; the name may be `*`. */
    serviceAccount: T.Optional(
      T.String({ pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?/(\\*|[a-z0-9]([-.a-z0-9]*[a-z0-9])?)$" }),
    ),
    /** Every service account of this namespace (= `serviceAccount: <namespace>/*`). */
    namespace: T.Optional(T.String({ pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" })),
  },
  { additionalProperties: false, minProperties: 1, maxProperties: 1 },
);

/** How callers prove who they are (`Proxy-Authorization`), for upstreams' `allow` rules. */
export const Callers = T.Object(
  {
    /** `Proxy-Authorization: Basic` users (what `http_proxy=http://user:pass@host` sends). */
    basic: T.Optional(
      T.Object(
        {
          /** htpasswd file of bcrypt hashes (`htpasswd -B`: $2y$, $2a$, $2b$); re-read when it changes. */
          usersFile: T.String({ minLength: 1 }),
          /** Password checks (bcrypt) running at once in the process, off the event loop. Default: one less than the CPU cores, at least 1. */
          maxConcurrentChecks: T.Optional(T.Integer({ minimum: 1, maximum: 1024 })),
          /** Password checks waiting for a free slot; beyond, 503 `caller_checks_busy` with Retry-After: 1. Default 100. */
          maxQueuedChecks: T.Optional(T.Integer({ minimum: 0, maximum: 100_000 })),
        },
        { additionalProperties: false },
      ),
    ),
    /** `Proxy-Authorization: Bearer` Kubernetes (projected) service-account tokens. */
    kubernetes: T.Optional(
      T.Object(
        {
          /** The tokens' `iss` must equal this (the cluster's service-account issuer). */
          issuer: T.String({ minLength: 1 }),
          /** `aud` must contain one of these. Default ["bearer-proxy"]. */
          audiences: T.Optional(
            T.Array(T.String({ minLength: 1 }), { minItems: 1, uniqueItems: true }),
          ),
          /** The cluster's JWKS as a file (re-read when it changes); exactly one of jwksFile and jwksUri. */
          jwksFile: T.Optional(T.String({ minLength: 1 })),
          /** The cluster's JWKS URL (https; e.g. https://kubernetes.default.svc/openid/v1/jwks); refetched on an unknown `kid`. */
          jwksUri: T.Optional(T.String({ pattern: "^https://" })),
          /** CA bundle (PEM) that `jwksUri` is checked against, on top of the system CAs. */
          caFile: T.Optional(T.String({ minLength: 1 })),
          /** A file holding a bearer token sent with every `jwksUri` fetch (`Authorization: Bearer`), re-read at each fetch; e.g. /var/run/secrets/kubernetes.io/serviceaccount/token for the API server. Only with jwksUri. Default: none (anonymous). */
          jwksTokenFile: T.Optional(T.String({ minLength: 1 })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const Upstream = T.Object(
  {
    /** Name used in logs, metrics and errors: lowercase letters, digits and dashes. */
    name: T.String({
      pattern: "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$",
      description: "lowercase letters, digits and '-'",
    }),
    /** The upstream's base URL; must be https:// unless `allowInsecureHttp`. */
    baseUrl: T.String({ minLength: 1 }),
    /** `default` (2022-01-01), `scripting-preview`, or any other X-Version value (then `tokenPath` is required). Default "default". */
    apiVersion: T.Optional(T.String({ minLength: 1, pattern: "^[\\x21-\\x7e]+$" })),
    /** Token endpoint path under `baseUrl`; derived from `apiVersion` when omitted. */
    tokenPath: T.Optional(T.String({ pattern: "^/" })),
    /** A token endpoint on another origin; overrides `baseUrl` + `tokenPath`. */
    tokenUrl: T.Optional(T.String({ minLength: 1 })),
    /** Token request body encoding: `form` (application/x-www-form-urlencoded;charset=UTF-8) or `json`. Default "form". */
    tokenRequestFormat: T.Optional(T.Union([T.Literal("form"), T.Literal("json")])),
    /**
     * How the client authenticates to the token endpoint. Default "body".
     * - `body`: client_id/client_secret fields, as the spec says;
     * - `basic`: HTTP Basic (RFC 6749 §2.3.1), see `basicEncoding`;
     * - `private-key-jwt`: a JWT signed with `clientKeyFile` (RFC 7523 §2.2), no secret;
     * - `client-assertion-file`: the pre-signed JWT in `clientAssertionFile` (e.g. a Kubernetes
     *   projected service-account token), no secret;
     * - `tls-client-auth`: the client certificate of `tokenTls` (RFC 8705 §2), no secret.
     */
    clientAuth: T.Optional(
      T.Union([
        T.Literal("body"),
        T.Literal("basic"),
        T.Literal("private-key-jwt"),
        T.Literal("client-assertion-file"),
        T.Literal("tls-client-auth"),
      ]),
    ),
    /**
     * `clientAuth: basic` only: `form` form-encodes id and secret before base64 (RFC 6749
     * §2.3.1); `raw` sends them as they are, for servers that do not decode them (old Spring
     * Security OAuth2; golang x/oauth2 `AuthStyleInHeaderNoEscape`). Default "form".
     */
    basicEncoding: T.Optional(T.Union([T.Literal("form"), T.Literal("raw")])),
    /** `private-key-jwt`: PEM private key (RSA ≥ 2048, EC P-256 or Ed25519), unencrypted; re-read when it changes. */
    clientKeyFile: T.Optional(T.String({ minLength: 1 })),
    /** `private-key-jwt`: `kid` header of the assertion (the key's id registered at the IdP). */
    clientKeyId: T.Optional(T.String({ minLength: 1, pattern: "^[\\x20-\\x7e]+$" })),
    /** `private-key-jwt`: PEM certificate of the key; adds the `x5t#S256` header (Microsoft Entra ID). */
    clientCertificateFile: T.Optional(T.String({ minLength: 1 })),
    /** `private-key-jwt`: the signed assertion. */
    assertion: T.Optional(
      T.Object(
        {
          /** `aud` claim. Default: the token endpoint URL. */
          audience: T.Optional(T.String({ minLength: 1 })),
          /** Validity of each assertion (`exp` - `iat`). Default "60s". */
          lifetime: T.Optional(Duration),
          /** RS256 | PS256 | ES256 | EdDSA. Default: inferred from the key (RSA → RS256, P-256 → ES256, Ed25519 → EdDSA). */
          algorithm: T.Optional(
            T.Union([
              T.Literal("RS256"),
              T.Literal("PS256"),
              T.Literal("ES256"),
              T.Literal("EdDSA"),
            ]),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    /** `client-assertion-file`: file holding a pre-signed JWT (e.g. a projected service-account token); read before every token request. */
    clientAssertionFile: T.Optional(T.String({ minLength: 1 })),
    /**
     * TLS towards the token endpoint, replacing `tls` for token requests; `certFile`/`keyFile`
     * are the client certificate of `tls-client-auth` (re-read when they change). Default: `tls`
     * (without `serverName` when the token endpoint is on another origin).
     */
    tokenTls: T.Optional(TlsSettings),
    /** The client id, inline (use `${VAR}`), or `clientIdFile`. */
    clientId: T.Optional(T.String({ minLength: 1 })),
    /** File holding the client id; re-read when it changes. */
    clientIdFile: T.Optional(T.String({ minLength: 1 })),
    /** The client secret, inline (use `${VAR}`), or `clientSecretFile`. Never logged. */
    clientSecret: T.Optional(T.String({ minLength: 1 })),
    /** File holding the client secret; re-read when it changes (rotation without restart). */
    clientSecretFile: T.Optional(T.String({ minLength: 1 })),
    /** `scope` sent in token requests; omitted when unset (never an empty `scope=`). */
    scope: T.Optional(T.String({ minLength: 1 })),
    /** Extra token request parameters (`audience`, `resource`, …). */
    tokenParams: T.Optional(T.Record(T.String({ pattern: "^[A-Za-z0-9_.-]+$" }), T.String())),
    /** Extra headers sent on token requests. */
    tokenHeaders: T.Optional(
      T.Record(T.String({ pattern: HeaderName }), T.String({ pattern: "^[\\x20-\\x7e\\t]*$" })),
    ),
    tls: T.Optional(TlsSettings),
    /** Which incoming requests go here. Default `{pathPrefix: "/"}`. */
    match: T.Optional(MatchRules),
    /** Remove `match.pathPrefix` from the path before forwarding. Default false. */
    stripPrefix: T.Optional(T.Boolean()),
    /** A listener of its own for this upstream (one port per upstream). */
    listen: T.Optional(ListenAddress),
    /** Allow a plain http:// baseUrl/tokenUrl (sends the secret in clear; logs a loud warning). Default false. */
    allowInsecureHttp: T.Optional(T.Boolean()),
    /** What to do with an Authorization / X-Version the client sent: `strip` (replace) or `reject` (400). Default "strip". */
    clientCredentials: T.Optional(T.Union([T.Literal("strip"), T.Literal("reject")])),
    /** Add X-Forwarded-For/-Proto/-Host. Default false (client-sent ones are always removed). */
    forwardedHeaders: T.Optional(T.Boolean()),
    /** Static extra headers added to every forwarded request. */
    headers: T.Optional(
      T.Record(T.String({ pattern: HeaderName }), T.String({ pattern: "^[\\x20-\\x7e\\t]*$" })),
    ),
    /** Largest request body kept so the request can be replayed after an upstream 401. Default "1MiB". */
    replayBodyLimit: T.Optional(ByteSize),
    /** Largest request body for this upstream; 0 for none. Default `limits.maxRequestBodySize`. */
    maxRequestBodySize: T.Optional(ByteSize),
    /** Keep-alive HTTP/1.1 connections per upstream origin (`http2: true` uses one). Default 128. */
    connections: T.Optional(T.Integer({ minimum: 1, maximum: 65535 })),
    /**
     * Largest response header block accepted from the upstream (status line, fields, and trailers).
     * Default "64KiB" (large cookies and JWT-bearing headers need 20–40 KB); beyond it the client
     * gets 502 `upstream_header_too_large`.
     */
    maxResponseHeaderSize: T.Optional(ByteSize),
    timeouts: T.Optional(Timeouts),
    /**
     * Protocols a client may switch to with `Upgrade` (RFC 9110 §7.8), compared case-insensitively;
     * the connection is then relayed byte for byte. `[]` refuses WebSocket with 501
     * `upgrade_not_allowed`; other unlisted protocols are ignored (a plain request). Default
     * ["websocket"].
     */
    upgrades: T.Optional(T.Array(T.String({ pattern: HeaderName }), { uniqueItems: true })),
    /**
     * Offer HTTP/2 to the upstream (TLS ALPN): requests share multiplexed connections instead of
     * a pool of HTTP/1.1 ones. Upgrades always use HTTP/1.1. Default false.
     */
    http2: T.Optional(T.Boolean()),
    token: T.Optional(TokenSettings),
    /**
     * Who may use this upstream (and so its credential); the rules are ORed. Absent: anyone who
     * reaches the listener. A caller identifies with `Proxy-Authorization` (see `callers`).
     */
    allow: T.Optional(T.Array(AllowRule, { minItems: 1 })),
    /** Sign a DPoP proof for the token request and every upstream request (RFC 9449); `{}` for an ephemeral key. */
    dpop: T.Optional(DpopSettings),
    /** Pace requests to this upstream (see `RateLimitSettings`). Default: none. */
    rateLimit: T.Optional(RateLimitSettings),
    /** Retry safe requests after a connection failure (see `RetrySettings`). */
    retry: T.Optional(RetrySettings),
    /**
     * Terminate `CONNECT <baseUrl host>:<port>` (443 when baseUrl names none) with a leaf
     * certificate signed by the top-level `intercept` CA, and run every request inside the
     * tunnel as a request to this upstream: routed by the CONNECT's authority alone, so
     * `match` does not apply inside, and the path goes as the client sent it (it addresses the
     * real URL; baseUrl's path is not prepended, `stripPrefix` does not apply). Needs an
     * https:// baseUrl and the `intercept` block; one upstream per authority. Default false.
     */
    intercept: T.Optional(T.Boolean()),
  },
  { additionalProperties: false },
);

/** `intercept`: the CA that signs leaf certificates for the upstreams with `intercept: true`. */
export const Intercept = T.Object(
  {
    /**
     * PEM certificate of the CA clients trust (`bearer-proxy intercept-ca` prints it): a CA
     * (basicConstraints CA:TRUE, keyCertSign when keyUsage is present), valid now. Certificates
     * after the first (intermediates up to the root) are sent with every leaf.
     */
    caCertFile: T.String({ minLength: 1 }),
    /**
     * The CA's unencrypted PEM private key, RSA ≥ 2048 bits or EC P-256; refused at start when
     * group or others can read it (`chmod 600`). Whoever holds it can impersonate the
     * intercepted hosts to every client that trusts the CA.
     */
    caKeyFile: T.String({ minLength: 1 }),
  },
  { additionalProperties: false },
);

export const Limits = T.Object(
  {
    /** Largest request header block (request line + headers). Default "16KiB"; beyond: 431. */
    maxHeaderSize: T.Optional(ByteSize),
    /** Most header fields in a request. Default 100; beyond: 431. */
    maxHeaderCount: T.Optional(T.Integer({ minimum: 1, maximum: 2000 })),
    /** Longest request target. Default "8KiB"; beyond: 414. */
    maxUrlLength: T.Optional(ByteSize),
    /** Headers must have arrived within this time. Default "10s"; else 408. */
    headersTimeout: T.Optional(Duration),
    /** Idle time on a keep-alive connection before it is closed. Default "5s". */
    keepAliveTimeout: T.Optional(Duration),
    /** Most concurrent client connections; beyond it new ones are refused. Default 10000. */
    maxConnections: T.Optional(T.Integer({ minimum: 1 })),
    /**
     * Requests queued behind the one in flight on one connection (HTTP/1.1 pipelining); beyond
     * it the connection is not read until the queue shrinks (backpressure). Default 16.
     */
    maxPipelinedRequests: T.Optional(T.Integer({ minimum: 1, maximum: 10_000 })),
    /** Largest request body; 0 for none. Default "1GiB"; beyond: 413. */
    maxRequestBodySize: T.Optional(ByteSize),
    /**
     * Slowest request body upload, in bytes per second (averaged, after `minDataRateGrace`);
     * 0 disables. Default 240; slower: 408, or the connection is closed once answered.
     */
    minRequestBodyRate: T.Optional(T.Integer({ minimum: 0 })),
    /**
     * Slowest a client may read a response, in bytes per second: when its buffer is full it
     * must take it within max(`minDataRateGrace`, buffered bytes / rate); 0 disables.
     * Default 240; slower: the connection is closed and the upstream request aborted.
     */
    minResponseRate: T.Optional(T.Integer({ minimum: 0 })),
    /** Time before the minimum data rates apply. Default "5s". */
    minDataRateGrace: T.Optional(Duration),
    /** Most requests handled at once by the process; 0 for none. Default 4096; beyond: 503. */
    maxInFlight: T.Optional(T.Integer({ minimum: 0 })),
    /**
     * Most upgraded connections (WebSocket and other `Upgrade`s) open at once, including those
     * waiting for the upstream's 101; 0 for none. Default 1024; beyond: 503 `too_many_upgrades`.
     */
    maxUpgrades: T.Optional(T.Integer({ minimum: 0 })),
    /** /readyz fails once requests have been refused over `maxInFlight` this long. Default "10s". */
    sustainedOverload: T.Optional(Duration),
    /**
     * Most requests waiting for a pacing turn or an upstream's pause, all together (they are not
     * in `maxInFlight`). Default 10000; beyond: 429 `rate_limited` at once.
     */
    maxWaiting: T.Optional(T.Integer({ minimum: 1 })),
    /**
     * Most requests of one caller (the identity an `allow` rule established, else the peer
     * address) waiting, over every upstream and budget. Default 1000; beyond: 429 `rate_limited`.
     */
    maxWaitingPerCaller: T.Optional(T.Integer({ minimum: 1 })),
  },
  { additionalProperties: false },
);

/**
 * How request paths are normalized, once, before routing, `allow`, pacing, the access log and
 * forwarding (the upstream receives the normalized path). Percent-encoded unreserved characters
 * (ALPHA DIGIT `-._~`) are always decoded and other percent-encodings written in uppercase hex
 * (RFC 3986 §6.2.2); dot-segments and backslashes are refused in every mode.
 */
export const Paths = T.Object(
  {
    /** Merge repeated slashes (`//admin` → `/admin`). Default true. */
    mergeSlashes: T.Optional(T.Boolean()),
    /**
     * An encoded slash (`%2F`, `%2f`): `reject` (400 `ambiguous_path`, nothing forwarded),
     * `unescape` (decoded to `/`, then routed and forwarded decoded) or `keep` (routed and
     * forwarded as `%2F`). Default "reject".
     */
    escapedSlashes: T.Optional(
      T.Union([T.Literal("reject"), T.Literal("unescape"), T.Literal("keep")]),
    ),
  },
  { additionalProperties: false },
);

export const Shutdown = T.Object(
  {
    /** After SIGTERM, keep serving (with /readyz failing) this long before closing the listener. Default "5s". */
    drainDelay: T.Optional(Duration),
    /** Then give in-flight requests this long to finish. Default "30s". */
    timeout: T.Optional(Duration),
  },
  { additionalProperties: false },
);

export const Readiness = T.Object(
  {
    /**
     * Which upstreams' tokens /readyz (and /startup) wait for: `all` (every upstream: one without
     * a usable token makes the proxy unready; lazy ones count once their first fetch failed),
     * `prefetched` (only credentials prefetched at start), `none` (tokens never affect readiness;
     * a failing credential shows in /status, metrics and its own routes' 503s). Default: `all`
     * when every upstream uses one credential (a sidecar), `none` with several (a gateway). A
     * credential is everything that changes the token issued (token URL, client id, secret or
     * key, `scope`, `tokenParams` such as `audience`, token headers, TLS identity, API version):
     * one client id asking for several audiences is several credentials, so one refused audience
     * does not take every replica out of rotation.
     */
    requireTokens: T.Optional(
      T.Union([T.Literal("all"), T.Literal("prefetched"), T.Literal("none")]),
    ),
  },
  { additionalProperties: false },
);

export const TokenCache = T.Object(
  {
    /** Share tokens across replicas through Redis. */
    redis: T.Optional(
      T.Object(
        {
          /**
           * One Redis: a redis:// or rediss:// (TLS) URL, with user:password if it needs them.
           * Exactly one of url, clusterNodes and sentinel.
           */
          url: T.Optional(T.String({ pattern: "^rediss?://" })),
          /**
           * Redis Cluster: URLs of some of its nodes (the rest are discovered), all with the
           * same scheme and credentials, which apply to every node.
           */
          clusterNodes: T.Optional(
            T.Array(T.String({ pattern: "^rediss?://" }), { minItems: 1, maxItems: 100 }),
          ),
          /** Redis behind Sentinel: the sentinels find the current master. */
          sentinel: T.Optional(
            T.Object(
              {
                /** The master's name in the sentinels' configuration (`sentinel monitor <name> …`). */
                masterName: T.String({ minLength: 1 }),
                /** Sentinels as host:port (port default 26379). */
                nodes: T.Array(
                  T.String({ minLength: 1, pattern: "^[A-Za-z0-9.-]+(:[0-9]{1,5})?$" }),
                  {
                    minItems: 1,
                    maxItems: 100,
                  },
                ),
                /** ACL user of the master and replicas. Default none (the default user). */
                username: T.Optional(T.String({ minLength: 1 })),
                /** Password of the master and replicas. Default none. */
                password: T.Optional(T.String({ minLength: 1 })),
                /** ACL user of the sentinels. Default none. */
                sentinelUsername: T.Optional(T.String({ minLength: 1 })),
                /** Password of the sentinels (their `requirepass`). Default none. */
                sentinelPassword: T.Optional(T.String({ minLength: 1 })),
                /** TLS to the sentinels, the master and the replicas. Default false. */
                tls: T.Optional(T.Boolean()),
              },
              { additionalProperties: false },
            ),
          ),
          /** Prefix of every key. Default "bearer-proxy:". */
          keyPrefix: T.Optional(T.String()),
          /** Cross-replica fetch lock lifetime. Default "15s". */
          lockTtl: T.Optional(Duration),
          /** Timeout of one Redis command before falling back to local fetching. Default "500ms". */
          commandTimeout: T.Optional(Duration),
        },
        { additionalProperties: false },
      ),
    ),
    /** Most token sources kept in memory at once (least recently used are evicted). Default 20000. */
    maxSources: T.Optional(T.Integer({ minimum: 1 })),
    /** Tokens of the first this many credentials (config order) are fetched at start, the rest on first use; `token.prefetch` wins. Default 100. */
    eagerLimit: T.Optional(T.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);

export const ConfigFile = T.Object(
  {
    /** The proxy listener (plain HTTP). Default 127.0.0.1:8080. */
    listen: T.Optional(ListenAddress),
    /** Health, readiness, metrics and status. Default 127.0.0.1:9901. */
    admin: T.Optional(ListenAddress),
    log: T.Optional(
      T.Object(
        {
          /** trace | debug | info | warn | error | fatal | silent. Default "info". */
          level: T.Optional(
            T.Union(
              ["trace", "debug", "info", "warn", "error", "fatal", "silent"].map((l) =>
                T.Literal(l),
              ),
            ),
          ),
          /** `json` (one object per line) or `pretty` (for humans). Default "json". */
          format: T.Optional(T.Union([T.Literal("json"), T.Literal("pretty")])),
        },
        { additionalProperties: false },
      ),
    ),
    /** Send token and API requests through this HTTP proxy. HTTP_PROXY/HTTPS_PROXY are ignored otherwise. */
    egressProxy: T.Optional(T.String({ pattern: "^https?://" })),
    limits: T.Optional(Limits),
    /** Request path normalization before routing (see `Paths`). */
    paths: T.Optional(Paths),
    shutdown: T.Optional(Shutdown),
    tokenCache: T.Optional(TokenCache),
    /**
     * OpenTelemetry traces. On when `exporter: otlp` or env OTEL_TRACES_EXPORTER=otlp; the
     * exporter is configured by the standard OTEL_* variables. Default: off.
     */
    tracing: T.Optional(
      T.Object(
        { exporter: T.Optional(T.Union([T.Literal("otlp"), T.Literal("none")])) },
        { additionalProperties: false },
      ),
    ),
    /** How callers identify themselves for `upstreams[].allow` (see `Callers`). */
    callers: T.Optional(Callers),
    /** What /readyz requires besides running (see `Readiness`). */
    readiness: T.Optional(Readiness),
    /** Terminate CONNECT for upstreams with `intercept: true`, with this CA (see `Intercept`). Default: off (CONNECT answers 405). */
    intercept: T.Optional(Intercept),
    /** The upstreams; at least one. */
    upstreams: T.Array(Upstream, { minItems: 1 }),
  },
  { additionalProperties: false },
);

export type ConfigFile = Static<typeof ConfigFile>;
export type UpstreamConfigFile = Static<typeof Upstream>;
