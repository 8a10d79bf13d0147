/**
 * Reading a token endpoint's answer: a 200 is checked field by field (oauth4webapi
 * `processGenericAccessTokenResponse`); anything else becomes a typed error carrying the IdP's
 * RFC 6749 §5.2 `error` and `error_description`, cleaned, and never a secret or a token.
 *
 * Real providers bend RFC 6749 §5.1 in ways that are harmless for a bearer token; each tolerance
 * below names the provider that needs it (docs/identity-providers.md lists them all). What could
 * break or inject a header, or is not a bearer token, is still refused; a DPoP token (RFC 9449)
 * is taken only from an upstream with `dpop` set, and there it is the only kind taken.
 */

import { isBearerTokenSyntax } from "../base/bearer-token.js";
import {
  DEFAULT_ACCEPT_TOKEN_TYPES,
  NON_BEARER_TOKEN_TYPES,
} from "../config/accept-token-types.js";
import { BearerProxyError, type ErrorCode } from "../errors.js";
import { CHECK_CREDENTIALS_HINT } from "./credential-hint.js";
import { errorExcerpt } from "./error-excerpt.js";
import { readResponseFields } from "./response-body.js";
import { retryAfterSeconds, sanitizeIdpText } from "./response-text.js";

/** A validated token response. */
export interface TokenResponse {
  accessToken: string;
  /**
   * Lifetime in seconds (clamped to 24 h), or undefined when the response had no expires_in.
   * Whole from a token endpoint; fractional for what remains of a token shared through Redis.
   */
  expiresInSeconds: number | undefined;
  scope: string | undefined;
  /** True when expires_in was above 24 h and was clamped. */
  expiresInClamped: boolean;
  /** "DPoP" for a DPoP-bound token (RFC 9449 §5; only with `dpop` set), else undefined: Bearer. */
  tokenType?: "Bearer" | "DPoP" | undefined;
  /** Departures from RFC 6749 that were tolerated but deserve a warning (absent when none). */
  notes?: readonly TokenResponseNote[];
}

/** A tolerated departure from RFC 6749, logged once per token source. */
export interface TokenResponseNote {
  code: "token_type_missing" | "scope_not_string";
  message: string;
}

/** expires_in above this is clamped (and flagged, so the caller can warn). */
export const MAX_EXPIRES_IN_SECONDS = 24 * 60 * 60;

/** RFC 6749 §5.2 codes that mean our configuration is wrong: retrying soon cannot help. */
const REJECTION_ERRORS = new Set([
  "invalid_client",
  "unauthorized_client",
  "invalid_grant",
  "unsupported_grant_type",
  "invalid_scope",
]);

/**
 * Registered OAuth error codes (RFC 6749 §4.1.2.1 and §5.2, RFC 8628 §3.5, RFC 8707, RFC 9449):
 * an answer with one of these says what went wrong; any other `error` (Spring Boot's
 * `"Forbidden"`) also gets a body excerpt.
 */
const REGISTERED_ERRORS = new Set([
  ...REJECTION_ERRORS,
  "invalid_request",
  "access_denied",
  "server_error",
  "temporarily_unavailable",
  "slow_down",
  "invalid_target",
  "invalid_dpop_proof",
  "use_dpop_nonce",
]);

/** A decimal number of seconds as a string: Azure AD v1, ADFS and Apigee send `"3599"`. */
const NUMERIC_STRING = /^[0-9]+(\.[0-9]+)?$/;

export interface ResponseContext {
  /** The token URL as shown in messages. */
  where: string;
  /**
   * Our client secret in every form it was sent (raw, form- and percent-encoded, JSON-escaped,
   * inside the Basic header): each is cut out of anything the IdP echoes back.
   */
  secrets: readonly string[];
  /** Our client id: cut out of body excerpts too, in the forms it may be echoed in. */
  clientId?: string | undefined;
  /** `token_type` values accepted, case-insensitively (`token.acceptTokenTypes`); default ["Bearer"]. */
  acceptTokenTypes?: readonly string[] | undefined;
  /** The next step when the endpoint refuses the client credentials (see credential-hint.ts). */
  credentialsHint?: string | undefined;
  /**
   * True for an upstream with `dpop` set: the request carried a proof, and only a DPoP-bound
   * token (`token_type: DPoP`) is taken.
   */
  dpop?: boolean | undefined;
  wallNow: () => number;
}

/**
 * Check a token endpoint answer field by field (oauth4webapi style): a TokenResponse for a valid
 * 200, otherwise throws a BearerProxyError naming the endpoint and status.
 */
export function parseTokenResponse(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  text: string,
  context: ResponseContext,
): TokenResponse {
  const contentType = headerValue(headers["content-type"]) ?? "";
  const body = readResponseFields(contentType, text);
  if (status !== 200) throw errorFromResponse(status, headers, contentType, text, body, context);

  const invalid = (problem: string, details: Record<string, unknown> = {}) =>
    new BearerProxyError(
      "BP_ERR_TOKEN_RESPONSE_INVALID",
      `token endpoint ${context.where} answered 200 with an invalid token response: ${problem}`,
      { details: { status, ...details } },
    );
  if (body.kind === "none") {
    // Not a token response at all (a login page, a proxy's error page): show what it was.
    const bodyExcerpt = errorExcerpt(text, contentType, ownValues(context));
    throw invalid(body.problem, bodyExcerpt === undefined ? {} : { bodyExcerpt });
  }
  // Form-encoded and text/plain bodies (old in-house servers) give every field as a string;
  // the checks below accept exactly what they accept from JSON.
  const { access_token, token_type, expires_in, scope } = body.fields;
  const notes: TokenResponseNote[] = [];

  if (typeof access_token !== "string" || access_token.length === 0) {
    throw invalid("access_token is missing or not a non-empty string");
  }
  if (!isBearerTokenSyntax(access_token)) {
    // Never echo it: a token with CR/LF or spaces would corrupt the Authorization header.
    throw invalid(
      "access_token contains a space, a control character or non-ASCII, which cannot follow Bearer in an Authorization header (RFC 6750)",
    );
  }

  if (context.dpop) {
    const problem = dpopTokenTypeProblem(token_type);
    if (problem !== undefined) throw invalid(problem, { expectedTokenType: "DPoP" });
  } else if (token_type === undefined) {
    // LinkedIn and other providers omit token_type; what they issue is used as a bearer token.
    notes.push({
      code: "token_type_missing",
      message: "token response has no token_type; treating the token as Bearer",
    });
  } else {
    const problem = tokenTypeProblem(token_type, context.acceptTokenTypes);
    if (problem !== undefined) {
      throw invalid(
        problem,
        typeof token_type === "string" ? { tokenType: sanitizeIdpText(token_type, 40) } : {},
      );
    }
  }

  const lifetime = readExpiresIn(expires_in);
  if ("problem" in lifetime) throw invalid(lifetime.problem);
  const { seconds } = lifetime;

  let grantedScope: string | undefined;
  if (typeof scope === "string") {
    grantedScope = scope === "" ? undefined : sanitizeIdpText(scope, 500);
  } else if (scope !== undefined) {
    // Some servers send scope as a JSON array (`[]`, `["read"]`); RFC 6749 §3.3 says a
    // space-separated string. The granted scope is informational here: ignore it, keep the token.
    notes.push({
      code: "scope_not_string",
      message: `token response scope is ${describeValue(scope)}, not a string; ignored`,
    });
  }

  return {
    accessToken: access_token,
    expiresInSeconds: seconds === undefined ? undefined : Math.min(seconds, MAX_EXPIRES_IN_SECONDS),
    scope: grantedScope,
    expiresInClamped: seconds !== undefined && seconds > MAX_EXPIRES_IN_SECONDS,
    ...(context.dpop ? { tokenType: "DPoP" as const } : {}),
    ...(notes.length > 0 ? { notes } : {}),
  };
}

/**
 * Why `tokenType` is not acceptable, or undefined when it is. Compared case-insensitively (RFC
 * 6749 §5.1 says so; Cognito, Keycloak's older releases and others send `bearer`).
 */
function tokenTypeProblem(
  tokenType: unknown,
  accepted: readonly string[] = DEFAULT_ACCEPT_TOKEN_TYPES,
): string | undefined {
  if (typeof tokenType !== "string") {
    return `token_type is ${describeValue(tokenType)}, expected "Bearer"`;
  }
  const lower = tokenType.toLowerCase();
  const shown = JSON.stringify(sanitizeIdpText(tokenType, 40));
  const never = NON_BEARER_TOKEN_TYPES.get(lower);
  if (never !== undefined) {
    return `token_type is ${shown}, which bearer-proxy cannot use: ${never}`;
  }
  if (accepted.some((type) => type.toLowerCase() === lower)) return undefined;
  // Apigee answers "BearerToken": the user may vouch that it is a bearer token by listing it.
  return `token_type is ${shown}, expected ${accepted.map((t) => JSON.stringify(t)).join(" or ")}; if it is a bearer token, add ${shown} to token.acceptTokenTypes`;
}

/**
 * With `dpop` set the token must be bound to our key: RFC 9449 §5 has the server say so with
 * `token_type: DPoP` (case-insensitive, as every token type). A server that ignored the proof
 * answers `Bearer` (or nothing); taking that token would silently drop the protection the
 * operator asked for, so it is refused rather than used as a bearer token.
 */
function dpopTokenTypeProblem(tokenType: unknown): string | undefined {
  if (typeof tokenType === "string" && tokenType.toLowerCase() === "dpop") return undefined;
  const found =
    typeof tokenType === "string"
      ? JSON.stringify(sanitizeIdpText(tokenType, 40))
      : describeValue(tokenType);
  return `token_type is ${found}, expected "DPoP" because upstreams[].dpop is set: the token endpoint ignored the DPoP proof and issued a token that is not bound to the key (RFC 9449 §5); bearer-proxy never falls back to an unbound token: enable DPoP-bound tokens for this client at the provider, or remove upstreams[].dpop`;
}

/**
 * expires_in as whole seconds. RFC 6749 §5.1 says a number of seconds; Azure AD v1, ADFS and
 * Apigee send it as a string (`"3599"`), some servers as a non-integer (`3599.0`, `35999.87`):
 * both are floored to whole seconds. Missing stays missing (the policy default applies).
 */
function readExpiresIn(value: unknown): { seconds: number | undefined } | { problem: string } {
  if (value === undefined) return { seconds: undefined };
  let seconds: number;
  if (typeof value === "number") {
    seconds = value;
  } else if (typeof value === "string" && NUMERIC_STRING.test(value)) {
    seconds = Number(value);
  } else {
    const found =
      typeof value === "string" ? "a string that is not a number of seconds" : describeValue(value);
    return { problem: `expires_in is ${found}, expected a positive number of seconds` };
  }
  if (!Number.isFinite(seconds) || Math.floor(seconds) < 1) {
    const found =
      typeof value === "string"
        ? `the string ${JSON.stringify(value.slice(0, 20))}`
        : describeValue(value);
    return { problem: `expires_in is ${found}, expected a positive number of seconds` };
  }
  return { seconds: Math.floor(seconds) };
}

function errorFromResponse(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  contentType: string,
  text: string,
  body: ReturnType<typeof readResponseFields>,
  context: ResponseContext,
): BearerProxyError {
  // Longest first, so a form that contains another is removed whole.
  const secrets = context.secrets.filter((v) => v.length > 0).sort((a, b) => b.length - a.length);
  const redact = (value: string) =>
    secrets.reduce((acc, secret) => acc.split(secret).join("[redacted]"), value);
  const fields = body.kind === "none" ? undefined : body.fields;
  let idpError: string | undefined;
  let idpErrorDescription: string | undefined;
  if (fields !== undefined && typeof fields.error === "string") {
    idpError = sanitizeIdpText(redact(fields.error), 100);
    if (typeof fields.error_description === "string") {
      idpErrorDescription = sanitizeIdpText(redact(fields.error_description), 200);
    }
  }
  const rejected =
    (idpError !== undefined && REJECTION_ERRORS.has(idpError)) || status === 401 || status === 403;
  const code: ErrorCode = rejected ? "BP_ERR_TOKEN_REJECTED" : "BP_ERR_TOKEN_HTTP";
  const retryAfter =
    status === 429 || status >= 500
      ? retryAfterSeconds(headerValue(headers["retry-after"]), context.wallNow())
      : undefined;

  let reason: string;
  let bodyExcerpt: string | undefined;
  if (idpError !== undefined) {
    reason = idpErrorDescription ? `${idpError}: ${idpErrorDescription}` : idpError;
  } else {
    reason = `content type ${contentType ? sanitizeIdpText(contentType, 80) : "(none)"}`;
  }
  if (idpError === undefined || !REGISTERED_ERRORS.has(idpError)) {
    // Not RFC 6749-shaped ({"ErrorCode":…}, {"status":403,"message":…}, HTML, text): the
    // excerpt goes to the log, /status and `check`, not into the message clients receive.
    bodyExcerpt = errorExcerpt(text, contentType, ownValues(context));
  }
  let message = `token endpoint ${context.where} answered ${status} (${reason})`;
  // invalid_client; any 401 (RFC 6749 §5.2 keeps it for client authentication; Auth0 says
  // access_denied with it); a bare 403 from a provider that does not speak RFC 6749 errors.
  const credentialsRefused =
    idpError === "invalid_client" || status === 401 || (idpError === undefined && status === 403);
  const hint = credentialsRefused ? (context.credentialsHint ?? CHECK_CREDENTIALS_HINT) : undefined;
  if (hint !== undefined) message += `; ${hint}`;
  return new BearerProxyError(code, message, {
    ...(retryAfter === undefined ? {} : { retryAfterSeconds: retryAfter }),
    details: {
      status,
      idpError,
      idpErrorDescription,
      ...(bodyExcerpt === undefined ? {} : { bodyExcerpt }),
      ...(hint === undefined ? {} : { hint }),
    },
  });
}

/** Everything of ours an excerpt must not show: the secret's forms, the client id's. */
function ownValues(context: ResponseContext): string[] {
  const id = context.clientId;
  if (id === undefined || id === "") return [...context.secrets];
  return [
    ...context.secrets,
    id,
    encodeURIComponent(id),
    new URLSearchParams([["", id]]).toString().slice(1),
    JSON.stringify(id).slice(1, -1),
  ];
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** The JSON type of a field, never its value (it might be a token). */
function describeValue(value: unknown): string {
  if (value === undefined) return "missing";
  if (value === null) return "null";
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return "not a finite number";
    return Number.isInteger(value) ? `the number ${value}` : `the number ${value.toFixed(3)}`;
  }
  if (typeof value === "string") return "a string";
  if (Array.isArray(value)) return "an array";
  return `a ${typeof value}`;
}
