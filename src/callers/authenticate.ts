/**
 * Reads a `Proxy-Authorization` value (RFC 9110 §11.7.1) into an `Authentication`: `Basic`
 * (RFC 7617) against the htpasswd users, `Bearer` (RFC 6750) as a service-account token.
 * Verifying is slow on purpose (bcrypt) or may fetch keys (JWKS), so a success is remembered,
 * keyed by a SHA-256 of the header value (a dump of the cache holds no credential), until the
 * token expires or, for Basic, `basicTtlMs` — and a Basic result no longer counts once the users
 * file has been reloaded, so a removed user or a changed password loses access at once.
 */
import { LRUCache } from "lru-cache";
import type { Logger } from "pino";
import type { Authentication, CallersConfig } from "./caller-types.js";
import { credentialKey } from "./credential-key.js";
import { createHtpasswdUsers, type HtpasswdUsers, type UsersFileStatus } from "./htpasswd.js";
import type { PasswordChecks } from "./password-checks.js";
import { createServiceAccountVerifier, type ServiceAccountVerifier } from "./service-account.js";

/** Remembers what a `Proxy-Authorization` value proves. */
export interface CallerAuthenticator {
  /**
   * The cached result for a header value (by its {@link credentialKey}), if a verification
   * succeeded recently and still holds; synchronous so the common case (a known credential)
   * costs no promise.
   */
  peek(key: string): Authentication | undefined;
  /**
   * Verify the header value (or answer from the cache); `key` is its {@link credentialKey}.
   * Never throws. Concurrent calls for the same uncached value share one verification;
   * failures are not cached.
   */
  authenticate(header: string, key?: string): Promise<Authentication>;
  /** The users file's state for /status; undefined without `callers.basic`. */
  usersFileStatus(): UsersFileStatus | undefined;
  /**
   * Read the users and JWKS files now rather than at the next poll: a reload whose new rules
   * name a user just added to the file must not answer 407 until then.
   */
  refresh(): Promise<void>;
  /** Stop the sources this authenticator built (file polls, JWKS connections). */
  close(): Promise<void>;
}

export interface CallerAuthenticatorOptions {
  callers: CallersConfig;
  /** Wall-clock ms (token `exp` is wall time); default Date.now. Also the cache's clock. */
  now?: (() => number) | undefined;
  /** How long a verified Basic credential is trusted without bcrypt. Default 5 min. */
  basicTtlMs?: number | undefined;
  /** Most cached credentials. Default 10,000. */
  maxEntries?: number | undefined;
  logger?: Pick<Logger, "warn" | "info"> | undefined;
  /** How often the users and JWKS files are stat()ed; 0 disables polling. Default 1000. */
  pollIntervalMs?: number | undefined;
  /**
   * Prebuilt sources (tests; an app sharing them across reloads), closed by whoever built them.
   * Default: built from `callers` and closed by `close()`.
   */
  users?: HtpasswdUsers | undefined;
  serviceAccounts?: ServiceAccountVerifier | undefined;
  /** The process's password check queue (shared across reloads). Default: one of its own. */
  passwordChecks?: PasswordChecks | undefined;
}

export const DEFAULT_BASIC_TTL_MS = 5 * 60_000;
export const DEFAULT_MAX_CACHED_CALLERS = 10_000;

interface CacheEntry {
  authentication: Authentication & { ok: true };
  /** The users file generation a Basic result was verified under; undefined for Bearer. */
  generation: number | undefined;
}

/** Build the sources `callers` configures; a missing or invalid file throws a ConfigError. */
export function createCallerAuthenticator(
  options: CallerAuthenticatorOptions,
): CallerAuthenticator {
  const now = options.now ?? Date.now;
  const basicTtlMs = options.basicTtlMs ?? DEFAULT_BASIC_TTL_MS;
  const { callers, logger, pollIntervalMs } = options;
  const users =
    options.users ??
    (callers.basic
      ? createHtpasswdUsers({
          file: callers.basic.usersFile,
          logger,
          pollIntervalMs,
          checks: options.passwordChecks,
          limits: {
            maxConcurrent: callers.basic.maxConcurrentChecks,
            maxQueued: callers.basic.maxQueuedChecks,
          },
        })
      : undefined);
  let serviceAccounts: ServiceAccountVerifier | undefined;
  try {
    serviceAccounts =
      options.serviceAccounts ??
      (callers.kubernetes
        ? createServiceAccountVerifier(callers.kubernetes, { now, logger, pollIntervalMs })
        : undefined);
  } catch (error) {
    if (!options.users) users?.close();
    throw error;
  }

  // No `ttl` here: peekKey checks each entry's own expiry, and an expired entry costs one slot
  // until it is read or evicted. lru-cache's TTL would check staleness on every get (reading
  // the clock, and once a millisecond arming a 1 ms timer to cache that reading), on the path
  // of every request with a credential.
  const cache = new LRUCache<string, CacheEntry>({
    max: options.maxEntries ?? DEFAULT_MAX_CACHED_CALLERS,
  });
  const inFlight = new Map<string, Promise<Authentication>>();

  function peekKey(key: string): Authentication | undefined {
    const entry = cache.get(key);
    if (entry === undefined) return undefined;
    const stale =
      entry.authentication.expiresAtMs <= now() ||
      (entry.generation !== undefined && entry.generation !== users?.generation);
    if (stale) {
      cache.delete(key);
      return undefined;
    }
    return entry.authentication;
  }

  async function verify(header: string, key: string): Promise<Authentication> {
    const credential = parseProxyAuthorization(header);
    if (credential.kind === "failure") return credential.authentication;
    let result: Authentication;
    let generation: number | undefined;
    if (credential.kind === "basic") {
      if (!users) return notConfigured("Basic", "callers.basic");
      // Captured before the slow compare: a reload meanwhile makes this result stale at once.
      generation = users.generation;
      result = await verifyBasic(users, credential.user, credential.password, now() + basicTtlMs);
    } else {
      if (!serviceAccounts) return notConfigured("Bearer", "callers.kubernetes");
      result = await serviceAccounts.verify(credential.token);
    }
    if (result.ok && result.expiresAtMs > now()) {
      cache.set(key, { authentication: Object.freeze(result), generation });
    }
    return result;
  }

  return {
    peek: peekKey,
    authenticate(header, key = credentialKey(header)) {
      const cached = peekKey(key);
      if (cached) return Promise.resolve(cached);
      let pending = inFlight.get(key);
      if (!pending) {
        pending = verify(header, key)
          .catch((error: unknown): Authentication => {
            // A bug below must not become an unhandled rejection in the request walk.
            logger?.warn({ err: { name: (error as Error).name } }, "caller verification failed");
            return {
              ok: false,
              reason: "invalid_token",
              message: "the credential could not be verified",
            };
          })
          .finally(() => inFlight.delete(key));
        inFlight.set(key, pending);
      }
      return pending;
    },
    usersFileStatus: () => users?.status(),
    async refresh() {
      await Promise.all([users?.check(), serviceAccounts?.check()]);
    },
    async close() {
      cache.clear();
      if (!options.users) users?.close();
      if (!options.serviceAccounts) await serviceAccounts?.close();
    },
  };
}

/** What a `Proxy-Authorization` value carries, before anything is verified. */
export type ProxyCredential =
  | { kind: "basic"; user: string; password: string }
  | { kind: "bearer"; token: string }
  | { kind: "failure"; authentication: Authentication & { ok: false } };

/** token68 (RFC 9110 §11.2): the only form a Basic or Bearer credential takes. */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Split a `Proxy-Authorization` value into its scheme's parts; the scheme is case-insensitive. */
export function parseProxyAuthorization(header: string): ProxyCredential {
  const match = /^[ \t]*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)(?:[ \t]+(.*?))?[ \t]*$/.exec(header);
  if (!match)
    return failure("malformed", "the Proxy-Authorization header is not <scheme> <credentials>");
  const scheme = match[1]!.toLowerCase();
  const value = match[2] ?? "";
  if (scheme !== "basic" && scheme !== "bearer") {
    return failure(
      "unsupported_scheme",
      `Proxy-Authorization scheme ${JSON.stringify(match[1]!.slice(0, 20))} is not Basic or Bearer`,
    );
  }
  if (!TOKEN68.test(value)) {
    return failure(
      "malformed",
      `the ${scheme === "basic" ? "Basic" : "Bearer"} credentials are missing or malformed`,
    );
  }
  if (scheme === "bearer") return { kind: "bearer", token: value };
  if (!BASE64.test(value)) return failure("malformed", "the Basic credentials are not base64");
  // RFC 7617 §2.1: UTF-8 is the charset servers should expect. The user-id cannot contain a
  // colon, the password can: split at the first.
  const decoded = Buffer.from(value, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon <= 0) return failure("malformed", "the Basic credentials are not user:password");
  return { kind: "basic", user: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

async function verifyBasic(
  users: HtpasswdUsers,
  user: string,
  password: string,
  expiresAtMs: number,
): Promise<Authentication> {
  // Checked after the compare (which costs the same for an unknown user), so the answer's
  // timing does not tell which users exist. One message for both: a client must not learn it.
  const known = users.has(user);
  const matches = await users.verify(user, password);
  if (matches === "busy") {
    return {
      ok: false,
      reason: "checks_busy",
      message: "too many password checks are waiting; retry in a second",
    };
  }
  if (matches && known) return { ok: true, caller: { kind: "user", name: user }, expiresAtMs };
  return {
    ok: false,
    reason: known ? "bad_password" : "unknown_user",
    message: "the user name or password is wrong",
  };
}

function failure(reason: "malformed" | "unsupported_scheme", message: string): ProxyCredential {
  return { kind: "failure", authentication: { ok: false, reason, message } };
}

function notConfigured(scheme: string, section: string): Authentication {
  return {
    ok: false,
    reason: "not_configured",
    message: `${scheme} credentials are not accepted (no ${section})`,
  };
}
