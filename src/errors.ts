/**
 * Every error code bearer-proxy produces lives here, once.
 *
 * Two families:
 * - `ProxyErrorCode`: errors the proxy answers a client with. Each has one HTTP status and travels
 *   to the client as a `bearer-proxy-error: <code>` header plus a JSON body
 *   `{"error": {"code", "message", "upstream"}}` so it can never be mistaken for an upstream reply.
 * - `BP_ERR_*` codes on `BearerProxyError`: internal failures (config, token endpoint, startup)
 *   that carry the public code they map to when a request is affected.
 *
 * Messages never contain a secret or a token: callers pass fingerprints, never raw values.
 */

/** Codes a client can see in `bearer-proxy-error` and the JSON body, with their HTTP status. */
export const PROXY_ERROR_STATUS = {
  bad_request: 400,
  /** An encoded slash (`%2F`) in the path with `paths.escapedSlashes: reject`. */
  ambiguous_path: 400,
  host_not_allowed: 403,
  /** A caller (or address) that no rule of the upstream's `allow` list admits. */
  caller_not_allowed: 403,
  no_route: 404,
  method_not_allowed: 405,
  /** No or an invalid `Proxy-Authorization` on a route whose `allow` names callers. */
  caller_unauthenticated: 407,
  request_timeout: 408,
  payload_too_large: 413,
  uri_too_long: 414,
  /** An `Expect` other than `100-continue` (RFC 9110 §10.1.1). */
  expectation_failed: 417,
  /**
   * Too many failed `Proxy-Authorization` attempts from this address lately (a verification in
   * flight counts as one until it ends).
   */
  caller_throttled: 429,
  /** `upstreams[].rateLimit`: the request's turn would come after `rateLimit.wait` (or the queue is full). */
  rate_limited: 429,
  /** The upstream asked to slow down (429/503 with Retry-After) for longer than the request may wait. */
  upstream_rate_limited: 429,
  header_fields_too_large: 431,
  not_implemented: 501,
  /** An `Upgrade: websocket` the upstream's `upgrades` list does not allow. */
  upgrade_not_allowed: 501,
  upstream_unreachable: 502,
  upstream_tls_error: 502,
  upstream_reset: 502,
  upstream_error: 502,
  /** The upstream's response head exceeded `upstreams[].maxResponseHeaderSize`. */
  upstream_header_too_large: 502,
  token_rejected: 502,
  token_unavailable: 503,
  /**
   * A service-account token on a route whose `allow` names callers, while the cluster's signing
   * keys cannot be loaded (the API server is down, and no keys were fetched before, or those
   * are past `JWKS_STALE_LIMIT_MS`). Not 407: the token may be good, and clients such as git
   * would ask for other credentials. With `Retry-After`.
   */
  caller_keys_unavailable: 503,
  /**
   * A Basic credential that could not be checked now: `callers.basic.maxConcurrentChecks`
   * password checks run and `maxQueuedChecks` wait already. Not 407 (the password may be good)
   * and not counted toward `caller_throttled`. With `Retry-After: 1`.
   */
  caller_checks_busy: 503,
  shutting_down: 503,
  /** No pooled upstream connection came free within `timeouts.queue`. */
  upstream_busy: 503,
  /** The process is handling `limits.maxInFlight` requests already. */
  overloaded: 503,
  /** The process holds `limits.maxUpgrades` upgraded (WebSocket) connections already. */
  too_many_upgrades: 503,
  upstream_timeout: 504,
  internal_error: 500,
} as const;

export type ProxyErrorCode = keyof typeof PROXY_ERROR_STATUS;

/**
 * Answers that are the gateway's policy at work, not trouble: a caller that an upstream's `allow`
 * list refused (407, 403, and 429 after repeated bad credentials) or its `rateLimit` paced (429).
 * /status and its page count them apart from errors, so an upstream is not listed as a problem
 * for doing what it was configured to do. `caller_keys_unavailable` is not one (the gateway
 * could not check a credential), nor `upstream_rate_limited` (the upstream asked to slow down).
 */
export const POLICY_REFUSAL_CODES: ReadonlySet<string> = new Set<ProxyErrorCode>([
  "caller_unauthenticated",
  "caller_not_allowed",
  "caller_throttled",
  "rate_limited",
]);

/** True for a code the gateway answers by policy (POLICY_REFUSAL_CODES). */
export function isPolicyRefusal(code: string): boolean {
  return POLICY_REFUSAL_CODES.has(code);
}

/** Internal error codes; each maps to the public code used when it reaches a client. */
export const ERROR_CODES = {
  BP_ERR_CONFIG_INVALID: "internal_error",
  BP_ERR_CONFIG_FILE: "internal_error",
  BP_ERR_SECRET_FILE: "token_unavailable",
  /** private-key-jwt: the key (or its certificate) cannot sign the assertion. */
  BP_ERR_CLIENT_KEY: "token_unavailable",
  /** client-assertion-file: the assertion is unreadable, not a JWT, or expired. */
  BP_ERR_CLIENT_ASSERTION: "token_unavailable",
  /** `upstreams[].dpop`: the DPoP key cannot be read or cannot sign proofs (RFC 9449). */
  BP_ERR_DPOP_KEY: "token_unavailable",
  BP_ERR_TOKEN_HTTP: "token_unavailable",
  BP_ERR_TOKEN_REJECTED: "token_rejected",
  BP_ERR_TOKEN_RESPONSE_INVALID: "token_unavailable",
  BP_ERR_TOKEN_TIMEOUT: "token_unavailable",
  BP_ERR_TOKEN_NETWORK: "token_unavailable",
  BP_ERR_TOKEN_REDIRECT: "token_unavailable",
  BP_ERR_TOKEN_UNAVAILABLE: "token_unavailable",
  BP_ERR_UPSTREAM_UNREACHABLE: "upstream_unreachable",
  BP_ERR_UPSTREAM_TLS: "upstream_tls_error",
  BP_ERR_UPSTREAM_TIMEOUT: "upstream_timeout",
  BP_ERR_UPSTREAM_RESET: "upstream_reset",
  BP_ERR_UPSTREAM: "upstream_error",
  BP_ERR_LISTEN: "internal_error",
  /** `intercept`: the CA cannot be loaded at start, or a leaf certificate cannot be made with it. */
  BP_ERR_INTERCEPT_CA: "internal_error",
} as const satisfies Record<string, ProxyErrorCode>;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface BearerProxyErrorOptions {
  cause?: unknown;
  /** Upstream name the error concerns, if any. */
  upstream?: string;
  /** Seconds a client should wait before retrying (sets `Retry-After`). */
  retryAfterSeconds?: number;
  /** Extra, secret-free details for logs and the status page (e.g. the IdP's `error`). */
  details?: Record<string, unknown>;
}

/** An error with a stable code. The message is safe to show to clients and to log. */
/** An error's message, or a thrown non-Error as text: for logs and answers that quote a failure. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export class BearerProxyError extends Error {
  readonly code: ErrorCode;
  readonly upstream: string | undefined;
  readonly retryAfterSeconds: number | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: BearerProxyErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "BearerProxyError";
    this.code = code;
    this.upstream = options.upstream;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.details = options.details;
  }

  /** The public code a client sees for this error. */
  get publicCode(): ProxyErrorCode {
    return ERROR_CODES[this.code];
  }

  get statusCode(): number {
    return PROXY_ERROR_STATUS[this.publicCode];
  }
}

/** A config problem: the field path, what was expected and what was found. */
export interface ConfigIssue {
  path: string;
  message: string;
}

/** Thrown by loadConfig with every problem found, so all are reported at once. */
export class ConfigError extends BearerProxyError {
  readonly issues: readonly ConfigIssue[];
  constructor(issues: readonly ConfigIssue[], source?: string) {
    const header = `invalid configuration${source ? ` in ${source}` : ""} (${issues.length} problem${issues.length === 1 ? "" : "s"})`;
    super(
      "BP_ERR_CONFIG_INVALID",
      [header, ...issues.map((i) => `  ${i.path}: ${i.message}`)].join("\n"),
    );
    this.name = "ConfigError";
    this.issues = issues;
  }
}

/**
 * A listener bearer-proxy opens. Each is moved by a different setting, which only the command
 * that configured it knows (`run`: config key, env variable, flag; `demo`: its port flags).
 */
export type ListenerRole =
  | { kind: "proxy" }
  | { kind: "admin" }
  /** An own `upstreams[].listen`, shared by these upstreams (`index`: position in the config). */
  | { kind: "upstream"; upstreams: readonly { name: string; index: number }[] }
  | { kind: "emulator" };

/** A listener that could not bind: which one, on which address, and why (Node's error as cause). */
export class ListenError extends BearerProxyError {
  readonly listener: ListenerRole;
  /** `host:port` (`[v6]:port`) as configured. */
  readonly address: string;
  /** The system's code, e.g. `EADDRINUSE`, `EACCES`, `EADDRNOTAVAIL`. */
  readonly reason: string;
  constructor(
    listener: ListenerRole,
    address: string,
    reason: string,
    explanation: string,
    cause: unknown,
  ) {
    super(
      "BP_ERR_LISTEN",
      `${listenerName(listener)} cannot listen on ${address}: ${explanation}`,
      {
        cause,
        details: { reason, address },
      },
    );
    this.name = "ListenError";
    this.listener = listener;
    this.address = address;
    this.reason = reason;
  }
}

/** "the proxy listener", "the listener of upstream reports", "the emulator". */
export function listenerName(listener: ListenerRole): string {
  switch (listener.kind) {
    case "proxy":
      return "the proxy listener";
    case "admin":
      return "the admin listener";
    case "emulator":
      return "the emulator";
    case "upstream": {
      const names = listener.upstreams.map((u) => u.name);
      return `the listener of upstream${names.length === 1 ? "" : "s"} ${names.join(", ")}`;
    }
  }
}

/** The JSON body of every error the proxy itself answers with. */
export interface ProxyErrorBody {
  error: { code: ProxyErrorCode; message: string; upstream?: string };
}

/** The JSON body of an error the proxy answers itself. */
export function proxyErrorBody(
  code: ProxyErrorCode,
  message: string,
  upstream?: string,
): ProxyErrorBody {
  return { error: upstream === undefined ? { code, message } : { code, message, upstream } };
}
