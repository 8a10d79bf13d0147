/**
 * Reading a token endpoint's answer: a 200 is checked field by field (oauth4webapi
 * `processGenericAccessTokenResponse`); anything else becomes a typed error carrying the IdP's
 * RFC 6749 §5.2 `error` and `error_description`, cleaned, and never a secret or a token.
 */
import { BearerProxyError, type ErrorCode } from "../errors.js";
import { parseRetryAfter, sanitizeIdpText } from "./response-text.js";

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
}

/** expires_in above this is clamped (and flagged, so the caller can warn). */
export const MAX_EXPIRES_IN_SECONDS = 24 * 60 * 60;

/** RFC 6750 §2.1 b64token: nothing that could break or extend an Authorization header. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** Whether `value` may follow `Bearer ` in an Authorization header (RFC 6750 b64token). */
export function isBearerTokenSyntax(value: string): boolean {
  return B64TOKEN.test(value);
}

/** RFC 6749 §5.2 codes that mean our configuration is wrong: retrying soon cannot help. */
const REJECTION_ERRORS = new Set([
  "invalid_client",
  "unauthorized_client",
  "invalid_grant",
  "unsupported_grant_type",
  "invalid_scope",
]);

export interface ResponseContext {
  /** The token URL as shown in messages. */
  where: string;
  /**
   * Our client secret in every form it was sent (raw, form- and percent-encoded, JSON-escaped,
   * inside the Basic header): each is cut out of anything the IdP echoes back.
   */
  secrets: readonly string[];
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
  const isJson = /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i.test(contentType.trim());
  const parsed = isJson ? parseJson(text) : undefined;
  if (status !== 200) throw errorFromResponse(status, headers, contentType, parsed, context);

  const invalid = (problem: string) =>
    new BearerProxyError(
      "BP_ERR_TOKEN_RESPONSE_INVALID",
      `token endpoint ${context.where} answered 200 with an invalid token response: ${problem}`,
      { details: { status } },
    );
  if (!isJson) {
    throw invalid(`content type ${describeContentType(contentType)}, expected application/json`);
  }
  if (!isPlainObject(parsed)) throw invalid("the body is not a JSON object");

  const { access_token, token_type, expires_in, scope } = parsed;
  if (typeof access_token !== "string" || access_token.length === 0) {
    throw invalid("access_token is missing or not a non-empty string");
  }
  if (!isBearerTokenSyntax(access_token)) {
    // Never echo it: a token with CR/LF or spaces would corrupt the Authorization header.
    throw invalid("access_token contains characters not allowed in a bearer token (RFC 6750)");
  }
  if (typeof token_type !== "string" || token_type.toLowerCase() !== "bearer") {
    const found =
      typeof token_type === "string"
        ? JSON.stringify(sanitizeIdpText(token_type, 20))
        : describeValue(token_type);
    throw invalid(`token_type is ${found}, expected "Bearer"`);
  }
  let expiresInSeconds: number | undefined;
  let expiresInClamped = false;
  if (expires_in !== undefined) {
    if (typeof expires_in !== "number" || !Number.isInteger(expires_in) || expires_in <= 0) {
      throw invalid(`expires_in is ${describeValue(expires_in)}, expected a positive integer`);
    }
    expiresInClamped = expires_in > MAX_EXPIRES_IN_SECONDS;
    expiresInSeconds = Math.min(expires_in, MAX_EXPIRES_IN_SECONDS);
  }
  if (scope !== undefined && typeof scope !== "string") {
    throw invalid(`scope is ${describeValue(scope)}, expected a string`);
  }
  return {
    accessToken: access_token,
    expiresInSeconds,
    scope: scope === undefined || scope === "" ? undefined : sanitizeIdpText(scope, 500),
    expiresInClamped,
  };
}

function errorFromResponse(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  contentType: string,
  parsed: unknown,
  context: ResponseContext,
): BearerProxyError {
  // Longest first, so a form that contains another is removed whole.
  const secrets = context.secrets.filter((v) => v.length > 0).sort((a, b) => b.length - a.length);
  const redact = (text: string) =>
    secrets.reduce((acc, secret) => acc.split(secret).join("[redacted]"), text);
  let idpError: string | undefined;
  let idpErrorDescription: string | undefined;
  if (isPlainObject(parsed) && typeof parsed.error === "string") {
    idpError = sanitizeIdpText(redact(parsed.error), 100);
    if (typeof parsed.error_description === "string") {
      idpErrorDescription = sanitizeIdpText(redact(parsed.error_description), 200);
    }
  }
  const rejected =
    (idpError !== undefined && REJECTION_ERRORS.has(idpError)) || status === 401 || status === 403;
  const code: ErrorCode = rejected ? "BP_ERR_TOKEN_REJECTED" : "BP_ERR_TOKEN_HTTP";
  const retryAfterSeconds =
    status === 429 || status >= 500
      ? parseRetryAfter(headerValue(headers["retry-after"]), context.wallNow())
      : undefined;

  let reason: string;
  if (idpError !== undefined) {
    reason = idpErrorDescription ? `${idpError}: ${idpErrorDescription}` : idpError;
  } else {
    reason = `content type ${describeContentType(contentType)}`;
  }
  let message = `token endpoint ${context.where} answered ${status} (${reason})`;
  if (idpError === "invalid_client") {
    message += "; the token endpoint rejected the client credentials: check clientId/clientSecret";
  }
  return new BearerProxyError(code, message, {
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    details: { status, idpError, idpErrorDescription },
  });
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function describeContentType(contentType: string): string {
  return contentType ? sanitizeIdpText(contentType, 80) : "(none)";
}

/** The JSON type of a field, never its value (it might be a token). */
function describeValue(value: unknown): string {
  if (value === undefined) return "missing";
  if (value === null) return "null";
  if (typeof value === "number")
    return Number.isInteger(value) ? `the number ${value}` : "not an integer";
  if (Array.isArray(value)) return "an array";
  return `a ${typeof value}`;
}
