/**
 * `callers.kubernetes`: a caller presents its projected service-account token (a JWT the API
 * server signs; Kubernetes "Service account token volume projection") and is known as
 * `namespace/name`. jose does all JWT work (parsing, signature, `iss`/`aud`/`exp`/`nbf`);
 * this file only chooses the rules and reads the identity out of the verified claims.
 */
import { decodeProtectedHeader, errors, type JWTPayload, jwtVerify } from "jose";
import type { Logger } from "pino";
import { createLogThrottle } from "../observability/log-throttle.js";
import type { Authentication, KubernetesCallersConfig } from "./caller-types.js";
import { createJwksSource, type JwksSource } from "./jwks-source.js";

/**
 * Asymmetric algorithms only: the API server signs with RS256 (RSA keys) or ES256/ES384/ES512
 * (EC keys). Leaving out HS* stops the classic confusion of verifying an HMAC made with the
 * public key as secret; leaving out `none` is the obvious rest.
 */
export const SERVICE_ACCOUNT_ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
];

/** Seconds of clock skew tolerated between the API server and this process for exp/nbf/iat. */
export const CLOCK_TOLERANCE_SECONDS = 5;
/** Signing keys that cannot be loaded are logged at most this often. */
const KEY_FAILURE_LOG_INTERVAL_MS = 60_000;

const SUBJECT_PREFIX = "system:serviceaccount:";
/** Namespaces are DNS labels; service-account names are DNS subdomains (RFC 1123). */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN =
  /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export interface ServiceAccountVerifier {
  /** Verify a service-account JWT; never throws (every failure is an `Authentication`). */
  verify(jwt: string): Promise<Authentication>;
  /** `jwksFile`: stat it now and reload on change (the poll does this every interval). */
  check(): Promise<void>;
  close(): Promise<void>;
}

export interface ServiceAccountVerifierDeps {
  /** Wall-clock ms used for `exp`/`nbf`; default Date.now. */
  now?: (() => number) | undefined;
  logger?: Pick<Logger, "warn" | "info"> | undefined;
  /** How often `jwksFile` is stat()ed; 0 disables polling. Default 1000. */
  pollIntervalMs?: number | undefined;
  /** NODE_EXTRA_CA_CERTS value for `jwksUri` (injected so tests control it). */
  extraCaCertsFile?: string | undefined;
  /** Replaces the key source built from `config` (tests). */
  keys?: JwksSource | undefined;
}

/**
 * A verifier for `config`; a missing or invalid `jwksFile`/`caFile`/`jwksTokenFile` throws a
 * ConfigError.
 */
export function createServiceAccountVerifier(
  config: KubernetesCallersConfig,
  deps: ServiceAccountVerifierDeps = {},
): ServiceAccountVerifier {
  const keys = deps.keys ?? createJwksSource(config, deps);
  const now = deps.now ?? Date.now;
  const audienceList = `[${config.audiences.join(", ")}]`;
  // A key outage fails every service-account caller: say so once a minute, with the count.
  const keyFailures = createLogThrottle(KEY_FAILURE_LOG_INTERVAL_MS, now);

  async function verify(jwt: string): Promise<Authentication> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(jwt, keys.getKey, {
        issuer: config.issuer,
        audience: [...config.audiences],
        algorithms: SERVICE_ACCOUNT_ALGORITHMS,
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        requiredClaims: ["exp", "sub"],
        currentDate: new Date(now()),
      }));
    } catch (error) {
      // The keys in hand lack the token's kid, but the latest refresh failed: the key may be one
      // the cluster published during the outage, and the caller did nothing wrong. A made-up
      // kid looks the same and is answered the same (503, not counted), on purpose: counting it
      // would throttle real callers, for a minute past the outage, over a key rotation; and not
      // counting it gives nothing away: no signature is checked without a key, the answer
      // depends only on the kid (public: the cluster publishes its keys) and on the outage, and
      // a 503 forgives no earlier failure of the address (caller-gate.ts). A flood costs a
      // header decode each; jose's cooldown and the backoff keep it from fetching.
      if (
        error instanceof errors.JWKSNoMatchingKey &&
        keys.lastRefreshFailed() &&
        hasClusterHeader(jwt)
      ) {
        return keysUnavailable(
          {
            name: error.name,
            message:
              "the token names a key (kid) that the keys kept through the failed JWKS refresh do not hold",
          },
          "the service-account token's key (kid) is not among the cluster's keys last fetched, and they cannot be refreshed now",
        );
      }
      const message = describeJoseError(error, jwt, config.issuer, audienceList);
      if (message === undefined) {
        // Not the token's fault (the key URL is down, timed out, answered nonsense).
        return keysUnavailable(
          error as Error,
          "the cluster's service-account signing keys could not be loaded",
        );
      }
      return invalid(message);
    }
    return identityOf(payload);
  }

  /**
   * A token left unchecked for want of keys. Logged at most once a minute, with the count, so
   * an operator sees why every service account is refused; not the caller's fault either, so
   * the gate answers 503 and counts no failed credential.
   */
  function keysUnavailable(err: { name: string; message: string }, message: string) {
    keyFailures.count();
    const refusedCallers = keyFailures.takeIfDue();
    if (refusedCallers !== undefined) {
      deps.logger?.warn(
        { err: { name: err.name, message: err.message }, refusedCallers },
        "callers.kubernetes: the cluster's signing keys could not be loaded",
      );
    }
    return { ok: false, reason: "keys_unavailable", message } satisfies Authentication;
  }

  return { verify, check: () => keys.check(), close: () => keys.close() };
}

/** The caller a verified payload names, or why the claims contradict each other. */
function identityOf(payload: JWTPayload): Authentication {
  const sub = payload.sub ?? "";
  const parts = sub.startsWith(SUBJECT_PREFIX) ? sub.slice(SUBJECT_PREFIX.length).split(":") : [];
  const [namespace, name] = parts;
  if (
    parts.length !== 2 ||
    namespace === undefined ||
    name === undefined ||
    !DNS_LABEL.test(namespace) ||
    !DNS_SUBDOMAIN.test(name)
  ) {
    return invalid("the token's subject is not system:serviceaccount:<namespace>:<name>");
  }
  // The API server writes both; two that disagree mean the token is not what it claims to be.
  const k8s = payload["kubernetes.io"];
  if (k8s !== undefined) {
    if (typeof k8s !== "object" || k8s === null) {
      return invalid('the token\'s "kubernetes.io" claim is not an object');
    }
    const claim = k8s as { namespace?: unknown; serviceaccount?: { name?: unknown } };
    if (claim.namespace !== undefined && claim.namespace !== namespace) {
      return invalid('the token\'s "kubernetes.io" namespace does not match its subject');
    }
    const saName =
      typeof claim.serviceaccount === "object" ? claim.serviceaccount?.name : undefined;
    if (
      (claim.serviceaccount !== undefined && typeof claim.serviceaccount !== "object") ||
      (saName !== undefined && saName !== name)
    ) {
      return invalid('the token\'s "kubernetes.io" service account does not match its subject');
    }
  }
  return {
    ok: true,
    caller: { kind: "serviceAccount", namespace, name },
    // requiredClaims made jose check that exp is present and a number.
    expiresAtMs: (payload.exp as number) * 1000,
  };
}

/**
 * A secret-free sentence for a token jose rejected, or undefined when the failure is the key
 * source's rather than the token's. Messages name claims and configured values, never the token.
 */
function describeJoseError(
  error: unknown,
  jwt: string,
  issuer: string,
  audienceList: string,
): string | undefined {
  if (error instanceof errors.JWTExpired) {
    return "the service-account token has expired";
  }
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.reason === "missing")
      return `the service-account token has no "${error.claim}" claim`;
    switch (error.claim) {
      case "iss":
        return `the service-account token's issuer is not ${issuer}`;
      case "aud":
        return `the service-account token's audience is not one of ${audienceList}`;
      case "nbf":
        return "the service-account token is not valid yet (nbf)";
      case "iat":
        return "the service-account token was issued in the future (iat)";
      default:
        return `the service-account token's "${error.claim}" claim is invalid`;
    }
  }
  if (error instanceof errors.JOSEAlgNotAllowed || error instanceof errors.JOSENotSupported) {
    return `the service-account token's algorithm${algOf(jwt)} is not allowed`;
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) {
    return "the service-account token's signature does not verify";
  }
  if (error instanceof errors.JWKSNoMatchingKey) {
    return "the service-account token is signed by a key the cluster does not publish";
  }
  if (error instanceof errors.JWKSMultipleMatchingKeys) {
    return "the service-account token does not say which of the cluster's keys signed it (kid)";
  }
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid) {
    return "the bearer token is not a signed JWT";
  }
  if (error instanceof errors.JWKInvalid) {
    return "the cluster key that matches the token cannot be used";
  }
  return undefined;
}

/**
 * The header is one the API server writes: an allowed algorithm (jose checked that before it
 * looked for a key) and a `kid` (the API server always names its key).
 */
function hasClusterHeader(jwt: string): boolean {
  try {
    const { alg, kid } = decodeProtectedHeader(jwt);
    return (
      typeof alg === "string" &&
      SERVICE_ACCOUNT_ALGORITHMS.includes(alg) &&
      typeof kid === "string" &&
      kid !== ""
    );
  } catch {
    return false;
  }
}

/** ` (RS256)` when the header names a plausible algorithm; nothing when it names junk. */
function algOf(jwt: string): string {
  try {
    const alg = decodeProtectedHeader(jwt).alg;
    return typeof alg === "string" && /^[A-Za-z0-9+-]{1,16}$/.test(alg) ? ` (${alg})` : "";
  } catch {
    return "";
  }
}

function invalid(message: string): Authentication {
  return { ok: false, reason: "invalid_token", message };
}
