import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import { SCRIPTING_PREVIEW_HEADER } from "../config/api-versions.js";
import type { EmulatorState } from "./control.js";
import { headerValues, readBodyLimited, sendJson } from "./http-io.js";
import {
  classifyContentType,
  parseBasicCredentials,
  parseFormBody,
  parseJsonBody,
  type TokenParams,
} from "./token-request.js";

/**
 * The token endpoints (SPEC.md "Authentication", RFC 6749 §4.4). Strict on purpose: the emulator
 * exists to catch requests a picky upstream would refuse. Decisions where SPEC.md is silent:
 * - An `X-Version` header on the default version's endpoint is refused (400 invalid_request):
 *   the default version is selected by the header's absence.
 * - Client credentials come from the body or from HTTP Basic (RFC 6749 §2.3.1), never both;
 *   a body `client_id` equal to the Basic one is tolerated.
 * - `scope`, when sent, must be a non-empty single-space separated subset of the configured scope.
 * - Bodies are limited to 64 KiB (413). Every answer carries `Cache-Control: no-store`.
 * - A request with one `DPoP` header (RFC 9449 §5) gets `token_type: DPoP`. The proof is checked
 *   for shape only (a compact JWS), not verified, and the token is not bound to its key: the
 *   emulator stands in for a DPoP provider in the bench and demos; proofs are verified against
 *   node-oidc-provider and test/helpers/dpop-resource-server.ts.
 */

/** The API version name the default version's tokens carry in `ver`. */
export const DEFAULT_VERSION = "2022-01-01";
/** Token path -> API version it issues tokens for. */
export const TOKEN_PATHS: Readonly<Record<string, string>> = Object.freeze({
  "/iam/v1/oauth2/token": DEFAULT_VERSION,
  "/oauth2/token": SCRIPTING_PREVIEW_HEADER,
});

const BODY_LIMIT_BYTES = 64 * 1024;
const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" };
const CHALLENGE = { "www-authenticate": 'Basic realm="emulator"' };
/** Three base64url segments (RFC 7515 §7.1); a JWT header always starts `ey` (`{"`). */
const COMPACT_JWS = /^ey[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

type Reply = (
  status: number,
  error: string,
  description: string,
  extra?: Record<string, string>,
) => void;

/** Serve one request to a token path; `version` is the version that path issues tokens for. */
export async function handleTokenRequest(
  state: EmulatorState,
  req: IncomingMessage,
  res: ServerResponse,
  version: string,
): Promise<void> {
  const counts = state.stats.tokenRequests;
  counts.total++;
  if (version === DEFAULT_VERSION) counts.default++;
  else counts.preview++;
  if (state.tokenFault) {
    state.tokenFault(req, res);
    return;
  }
  const reject: Reply = (status, error, description, extra = {}) => {
    counts.rejected++;
    sendJson(res, status, { error, error_description: description }, { ...NO_STORE, ...extra });
  };

  if (req.method !== "POST") {
    reject(405, "invalid_request", "the token endpoint accepts only POST", { allow: "POST" });
    return;
  }
  const versionHeaders = headerValues(req, "x-version");
  if (version === DEFAULT_VERSION && versionHeaders.length > 0) {
    reject(
      400,
      "invalid_request",
      "this token endpoint (default API version) takes no X-Version header",
    );
    return;
  }
  if (
    version !== DEFAULT_VERSION &&
    (versionHeaders.length !== 1 || versionHeaders[0] !== version)
  ) {
    reject(400, "invalid_request", `this token endpoint requires the header X-Version: ${version}`);
    return;
  }
  const contentTypes = headerValues(req, "content-type");
  const encoding = contentTypes.length === 1 ? classifyContentType(contentTypes[0]) : undefined;
  if (encoding === undefined) {
    reject(
      400,
      "invalid_request",
      "Content-Type must be application/x-www-form-urlencoded;charset=UTF-8 or application/json",
    );
    return;
  }
  counts[encoding]++;

  const proofs = headerValues(req, "dpop");
  if (proofs.length > 1 || (proofs.length === 1 && !COMPACT_JWS.test(proofs[0]!))) {
    reject(400, "invalid_dpop_proof", "expected one DPoP header holding a compact JWS");
    return;
  }

  const basic = readBasicAuth(req, reject);
  if (basic === null) return;
  if (basic) counts.basic++;

  const body = await readBodyLimited(req, BODY_LIMIT_BYTES);
  if (body.kind === "aborted") return;
  if (body.kind === "too-large") {
    reject(413, "invalid_request", "request body exceeds 64 KiB", { connection: "close" });
    return;
  }
  const parsed = encoding === "form" ? parseFormBody(body.body) : parseJsonBody(body.body);
  if (!parsed.ok) {
    reject(400, "invalid_request", parsed.description);
    return;
  }
  const params = mergeClientAuth(parsed.value, basic, reject);
  if (!params) return;
  grantToken(state, params, version, proofs.length === 1, reject, res);
}

/**
 * undefined: no Authorization header; null: refused (already answered); otherwise the Basic
 * credentials. Per RFC 6749 §5.2 a failed header authentication is a 401 with a challenge.
 */
function readBasicAuth(
  req: IncomingMessage,
  reject: Reply,
): { clientId: string; clientSecret: string } | undefined | null {
  const headers = headerValues(req, "authorization");
  if (headers.length === 0) return undefined;
  if (headers.length > 1) {
    reject(400, "invalid_request", "more than one Authorization header");
    return null;
  }
  const credentials = parseBasicCredentials(headers[0]!);
  if (!credentials.ok) {
    reject(
      401,
      "invalid_client",
      `${credentials.description}; only HTTP Basic client authentication is supported`,
      CHALLENGE,
    );
    return null;
  }
  return credentials.value;
}

function mergeClientAuth(
  params: TokenParams,
  basic: { clientId: string; clientSecret: string } | undefined,
  reject: Reply,
):
  | (Required<Pick<TokenParams, "client_id" | "client_secret" | "grant_type">> & TokenParams)
  | undefined {
  if (basic) {
    // RFC 6749 §2.3: one authentication method per request.
    if (
      params.client_secret !== undefined ||
      (params.client_id !== undefined && params.client_id !== basic.clientId)
    ) {
      reject(400, "invalid_request", "client credentials sent both in the body and in HTTP Basic");
      return undefined;
    }
    params = { ...params, client_id: basic.clientId, client_secret: basic.clientSecret };
  }
  const missing = (["grant_type", "client_id", "client_secret"] as const).filter(
    (name) => params[name] === undefined,
  );
  if (missing.length > 0) {
    reject(
      400,
      "invalid_request",
      `missing parameter${missing.length > 1 ? "s" : ""}: ${missing.join(", ")}`,
    );
    return undefined;
  }
  return params as Required<Pick<TokenParams, "client_id" | "client_secret" | "grant_type">> &
    TokenParams;
}

function grantToken(
  state: EmulatorState,
  params: Required<Pick<TokenParams, "client_id" | "client_secret" | "grant_type">> & TokenParams,
  version: string,
  dpop: boolean,
  reject: Reply,
  res: ServerResponse,
): void {
  if (params.grant_type !== "client_credentials") {
    reject(400, "unsupported_grant_type", "only grant_type=client_credentials is supported");
    return;
  }
  const expected = state.clients.get(params.client_id);
  if (expected === undefined || !secretsEqual(expected, params.client_secret)) {
    reject(401, "invalid_client", "client authentication failed", CHALLENGE);
    return;
  }
  if (params.audience !== undefined && state.refusedAudiences.has(params.audience)) {
    reject(403, "access_denied", "the client is not authorized for this audience");
    return;
  }
  const scope = grantedScope(state.scopes, params.scope);
  if (scope === undefined) {
    reject(
      400,
      "invalid_scope",
      "scope must be a single-space separated subset of the client's scopes",
    );
    return;
  }
  const lifetimeSeconds = state.tokenLifetimeSeconds;
  const accessToken = state.tokens.issue(params.client_id, version, scope, lifetimeSeconds);
  sendJson(
    res,
    200,
    {
      access_token: accessToken,
      // Issue time is truncated to whole seconds, so one second less never overstates the lifetime.
      expires_in: Math.max(1, lifetimeSeconds - 1),
      scope,
      token_type: dpop ? "DPoP" : "Bearer",
    },
    NO_STORE,
  );
}

/** The scope to grant, or undefined if the request's scope is empty, malformed or too wide. */
function grantedScope(
  configured: readonly string[],
  requested: string | undefined,
): string | undefined {
  if (requested === undefined) return configured.join(" ");
  const wanted = requested.split(" ");
  if (wanted.some((s) => s === "" || !configured.includes(s))) return undefined;
  return [...new Set(wanted)].join(" ");
}

// Compare digests so the comparison time does not depend on where the secrets differ.
function secretsEqual(expected: string, given: string): boolean {
  const a = createHash("sha256").update(expected).digest();
  const b = createHash("sha256").update(given).digest();
  return timingSafeEqual(a, b);
}
