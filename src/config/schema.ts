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
    /** Fetch the token at start instead of on first use. Default true (see `tokenCache.eagerLimit`). */
    prefetch: T.Optional(T.Boolean()),
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
    /** How the client authenticates: `body` (client_id/client_secret fields, as the spec says) or `basic` (RFC 6749 §2.3.1). Default "body". */
    clientAuth: T.Optional(T.Union([T.Literal("body"), T.Literal("basic")])),
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
    /** Keep-alive connections per upstream origin. Default 128. */
    connections: T.Optional(T.Integer({ minimum: 1, maximum: 65535 })),
    timeouts: T.Optional(Timeouts),
    token: T.Optional(TokenSettings),
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

export const TokenCache = T.Object(
  {
    /** Share tokens across replicas through Redis. */
    redis: T.Optional(
      T.Object(
        {
          /** redis:// or rediss:// URL. */
          url: T.String({ pattern: "^rediss?://" }),
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
    /** With more credentials than this, tokens are fetched on first use instead of at start. Default 100. */
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
    shutdown: T.Optional(Shutdown),
    tokenCache: T.Optional(TokenCache),
    /** The upstreams; at least one. */
    upstreams: T.Array(Upstream, { minItems: 1 }),
  },
  { additionalProperties: false },
);

export type ConfigFile = Static<typeof ConfigFile>;
export type UpstreamConfigFile = Static<typeof Upstream>;
