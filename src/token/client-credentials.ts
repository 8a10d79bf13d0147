/**
 * One OAuth 2.0 client-credentials token request (RFC 6749 §4.4) and a field-by-field check of
 * the answer (oauth4webapi `processGenericAccessTokenResponse`). Every failure becomes a
 * BearerProxyError whose message names the endpoint and the status, never a secret or a token.
 * With `upstreams[].dpop` the request carries a DPoP proof (RFC 9449 §5) made by the dpop room,
 * and a `use_dpop_nonce` answer is retried once with the server's nonce (§8).
 */
import type { Dispatcher } from "undici";
import type { TokenEndpointSpec } from "../config/proxy-config.js";
import { BearerProxyError, errorMessage } from "../errors.js";
import { request } from "../net/undici-core.js";
import {
  type ClientAuthParts,
  type ClientCredentials,
  createClientAuth,
} from "./client-auth/index.js";
import { credentialsRejectedHint } from "./credential-hint.js";
import type { Dpop } from "./dpop/index.js";
import { describeTokenUrl, sanitizeIdpText } from "./response-text.js";
import { parseTokenResponse, type TokenResponse } from "./token-response.js";

export { formEncode, sentSecretForms } from "./client-auth/index.js";
export { MAX_EXPIRES_IN_SECONDS, type TokenResponse } from "./token-response.js";
export type { ClientCredentials };

export interface TokenRequestDeps {
  /** The token endpoint's own dispatcher (same TLS settings as the upstream). */
  dispatcher: Dispatcher;
  /** Bound on the whole exchange, body included. */
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  /** Wall clock for Retry-After HTTP-dates and assertion times; default Date.now. */
  wallNow?: () => number;
  /** Told how the client authenticated (secret-free facts; `bearer-proxy check` prints them). */
  onClientAuth?: (facts: readonly string[]) => void;
  /**
   * The credential's DPoP key (`upstreams[].dpop`): each attempt carries a fresh proof, and
   * only a DPoP-bound token is taken. Undefined: a plain bearer token request.
   */
  dpop?: Dpop | undefined;
}

/** Longest token response body read; a real one is a few KiB at most. */
export const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;

/** Body parameters that extraParams may not override. */
const RESERVED_PARAMS = new Set([
  "grant_type",
  "client_id",
  "client_secret",
  "client_assertion",
  "client_assertion_type",
  "scope",
]);

/** Ask the token endpoint for a token. Rejects with a BearerProxyError (BP_ERR_TOKEN_*). */
export async function requestToken(
  spec: TokenEndpointSpec,
  credentials: ClientCredentials,
  deps: TokenRequestDeps,
): Promise<TokenResponse> {
  const where = describeTokenUrl(spec.tokenUrl);
  const url = new URL(spec.tokenUrl);
  if (url.protocol !== "https:" && !(url.protocol === "http:" && spec.allowInsecureHttp)) {
    throw new BearerProxyError(
      "BP_ERR_CONFIG_INVALID",
      `token endpoint ${where} is not https (set allowInsecureHttp to send credentials in clear)`,
    );
  }
  const wallNow = deps.wallNow ?? Date.now;
  const { dpop } = deps;

  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error("token request timed out"));
  }, deps.timeoutMs);
  timer.unref();
  const onCallerAbort = () => controller.abort(deps.signal?.reason);
  deps.signal?.addEventListener("abort", onCallerAbort, { once: true });
  if (deps.signal?.aborted) onCallerAbort();

  try {
    for (let attempt = 1; ; attempt++) {
      // Built anew for the nonce retry too: a private-key-jwt assertion must not be replayed
      // (RFC 7523 §3 `jti`), and a proof never is (RFC 9449 §11.1).
      const { headers, body, sentSecrets, facts } = await buildTokenRequest(
        spec,
        credentials,
        wallNow(),
      );
      deps.onClientAuth?.(facts);
      if (dpop) headers.dpop = dpop.proofFor("POST", url);
      const response = await request(url, {
        method: "POST",
        headers,
        body,
        dispatcher: deps.dispatcher,
        signal: controller.signal,
      });
      const text = await readResponse(response, where);
      // Every answer may carry a new DPoP-Nonce (§8.2); 400 use_dpop_nonce asks for one retry.
      const retry = dpop?.noteResponse(url, response.statusCode, response.headers, text) ?? false;
      if (retry && attempt === 1) continue;
      return parseTokenResponse(response.statusCode, response.headers, text, {
        where,
        secrets: sentSecrets,
        clientId: credentials.clientId,
        acceptTokenTypes: spec.acceptTokenTypes,
        credentialsHint: credentialsRejectedHint(spec, credentials),
        dpop: dpop !== undefined,
        wallNow,
      });
    }
  } catch (error) {
    if (error instanceof BearerProxyError) throw error;
    if (timedOut) {
      throw new BearerProxyError(
        "BP_ERR_TOKEN_TIMEOUT",
        `token endpoint ${where} did not answer within ${deps.timeoutMs} ms`,
        { cause: error, details: { timeoutMs: deps.timeoutMs } },
      );
    }
    if (deps.signal?.aborted) throw deps.signal.reason ?? error;
    throw translateNetworkError(error, where);
  } finally {
    clearTimeout(timer);
    deps.signal?.removeEventListener("abort", onCallerAbort);
  }
}

/** Headers and body for one token request, and what in them is secret (exported for tests). */
export async function buildTokenRequest(
  spec: TokenEndpointSpec,
  credentials: ClientCredentials,
  nowWallMs: number = Date.now(),
): Promise<{ headers: Record<string, string>; body: string } & ClientAuthParts> {
  const auth = await createClientAuth(spec).authenticate({
    credentials,
    tokenUrl: spec.tokenUrl,
    nowWallMs,
  });
  const fields: [string, string][] = [["grant_type", "client_credentials"], ...auth.fields];
  // Never an empty scope= (some IdPs reject it).
  if (spec.scope) fields.push(["scope", spec.scope]);
  for (const [name, value] of Object.entries(spec.extraParams)) {
    if (!RESERVED_PARAMS.has(name)) fields.push([name, value]);
  }

  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(spec.extraHeaders))
    headers[name.toLowerCase()] = value;
  headers.accept = "application/json";
  if (spec.versionHeader !== undefined) headers["x-version"] = spec.versionHeader;
  Object.assign(headers, auth.headers);
  if (spec.format === "json") {
    headers["content-type"] = "application/json";
    return { ...auth, headers, body: JSON.stringify(Object.fromEntries(fields)) };
  }
  headers["content-type"] = "application/x-www-form-urlencoded;charset=UTF-8";
  return { ...auth, headers, body: new URLSearchParams(fields).toString() };
}

async function readResponse(response: Dispatcher.ResponseData, where: string): Promise<string> {
  const { statusCode, body } = response;
  if (statusCode >= 300 && statusCode < 400) {
    // Never follow: a 307/308 would re-send the secret to wherever Location points.
    await body.dump().catch(() => undefined);
    throw new BearerProxyError(
      "BP_ERR_TOKEN_REDIRECT",
      `token endpoint ${where} answered ${statusCode} (a redirect); redirects are never followed for token requests`,
      { details: { status: statusCode } },
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_TOKEN_RESPONSE_BYTES) {
      body.destroy();
      throw new BearerProxyError(
        "BP_ERR_TOKEN_RESPONSE_INVALID",
        `token endpoint ${where} answered ${statusCode} with a body over ${MAX_TOKEN_RESPONSE_BYTES} bytes`,
        { details: { status: statusCode } },
      );
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function translateNetworkError(error: unknown, where: string): BearerProxyError {
  const code = (error as { code?: unknown } | null)?.code;
  const message = errorMessage(error);
  const what = sanitizeIdpText(typeof code === "string" ? `${code}: ${message}` : message, 200);
  if (
    code === "UND_ERR_CONNECT_TIMEOUT" ||
    code === "UND_ERR_HEADERS_TIMEOUT" ||
    code === "UND_ERR_BODY_TIMEOUT"
  ) {
    return new BearerProxyError(
      "BP_ERR_TOKEN_TIMEOUT",
      `token endpoint ${where} timed out (${what})`,
      {
        cause: error,
      },
    );
  }
  return new BearerProxyError(
    "BP_ERR_TOKEN_NETWORK",
    `token request to ${where} failed (${what})`,
    {
      cause: error,
    },
  );
}
