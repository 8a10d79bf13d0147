/**
 * The proxy's own error answers, and the translation of upstream (undici / Node / TLS) failures
 * into our public codes at the boundary. One shape everywhere: a status, a
 * `bearer-proxy-error: <code>` header and a JSON body `{"error": {"code", "message", "upstream"}}`.
 * Messages are fixed texts or config names — never a stack, a token or a secret.
 */
import type { ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import {
  BearerProxyError,
  PROXY_ERROR_STATUS,
  type ProxyErrorCode,
  proxyErrorBody,
} from "../errors.js";

/** A failure mapped to what the client is told; `cause` keeps the original for logs. */
export interface MappedProxyError {
  code: ProxyErrorCode;
  message: string;
  retryAfterSeconds?: number | undefined;
  cause: unknown;
}

const TLS_CODES = new Set([
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "CERT_REVOKED",
  "CERT_UNTRUSTED",
  "CERT_REJECTED",
  "CERT_SIGNATURE_FAILURE",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "INVALID_CA",
  "HOSTNAME_MISMATCH",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "ERR_TLS_HANDSHAKE_TIMEOUT",
  "EPROTO",
  "UND_ERR_PRX_TLS",
]);

const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_FAIL",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "EADDRNOTAVAIL",
]);

/**
 * Connect timeouts answer 504 like every other timeout (our rule: "504 on timeout"), so a
 * client can tell "slow or black-holed" from "refused".
 */
const TIMEOUT_CODES = new Set([
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "ETIMEDOUT",
]);

const RESET_CODES = new Set([
  "ECONNRESET",
  "EPIPE",
  "ECONNABORTED",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_DESTROYED",
  "UND_ERR_RES_CONTENT_LENGTH_MISMATCH",
  "UND_ERR_INFO",
  // HTTP/2 (upstreams[].http2): the stream or the whole session was reset or went away.
  "ERR_HTTP2_STREAM_ERROR",
  "ERR_HTTP2_SESSION_ERROR",
  "ERR_HTTP2_GOAWAY_SESSION",
  "ERR_HTTP2_STREAM_CANCEL",
  "ERR_HTTP2_INVALID_SESSION",
]);

/** Error codes along the `cause` chain (undici and ProxyAgent wrap the socket's error). */
export function errorCodes(err: unknown): string[] {
  const codes: string[] = [];
  let current: unknown = err;
  for (let depth = 0; depth < 5 && current instanceof Error; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
    current = current.cause;
  }
  return codes;
}

/**
 * Codes and message of a failure for the request log. For a BearerProxyError only the codes:
 * the token component already logs each failure with its details once, not once per request.
 * undici's and Node's messages describe sockets and TLS, never payloads.
 */
export function describeCause(err: unknown): { codes: string[]; message?: string } | undefined {
  if (!(err instanceof Error)) return undefined;
  if (err instanceof BearerProxyError) return { codes: errorCodes(err) };
  return { codes: errorCodes(err), message: err.message };
}

/** undici's code for a response head over its maxHeaderSize. */
const HEADERS_OVERFLOW = "UND_ERR_HEADERS_OVERFLOW";

/** "64 KiB" for whole KiB, else bytes. */
function describeSize(bytes: number): string {
  return bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`;
}

/**
 * Maps a failure talking to `upstream` (or getting its token) to the public error.
 * `maxResponseHeaderSizeBytes` names the limit in the message when the response head exceeded it.
 */
export function mapUpstreamError(
  err: unknown,
  upstream: string,
  maxResponseHeaderSizeBytes?: number,
): MappedProxyError {
  if (err instanceof BearerProxyError) {
    return {
      code: err.publicCode,
      // errors.ts contract: a BearerProxyError's message is safe to show (the token engine
      // scrubs what the IdP said); it tells the client why, e.g. "answered 500 (server_error)".
      message: err.message,
      retryAfterSeconds: err.retryAfterSeconds,
      cause: err,
    };
  }
  const codes = errorCodes(err);
  const has = (set: ReadonlySet<string>) => codes.some((c) => set.has(c));
  if (codes.includes(HEADERS_OVERFLOW)) {
    const limit =
      maxResponseHeaderSizeBytes === undefined
        ? ""
        : ` (${describeSize(maxResponseHeaderSizeBytes)})`;
    return {
      code: "upstream_header_too_large",
      message: `upstream ${upstream} sent response headers larger than upstreams[].maxResponseHeaderSize${limit}; raise it if these headers are expected`,
      cause: err,
    };
  }
  if (has(TLS_CODES) || codes.some((c) => c.startsWith("ERR_SSL_"))) {
    return {
      code: "upstream_tls_error",
      message: `TLS handshake with upstream ${upstream} failed (certificate not trusted or invalid)`,
      cause: err,
    };
  }
  if (has(UNREACHABLE_CODES)) {
    return {
      code: "upstream_unreachable",
      message: `upstream ${upstream} is unreachable (connection refused or name not resolved)`,
      cause: err,
    };
  }
  if (has(TIMEOUT_CODES)) {
    return {
      code: "upstream_timeout",
      message: `upstream ${upstream} did not answer in time`,
      cause: err,
    };
  }
  if (has(RESET_CODES)) {
    return {
      code: "upstream_reset",
      message: `upstream ${upstream} closed the connection unexpectedly`,
      cause: err,
    };
  }
  return {
    code: "upstream_error",
    message: `forwarding to upstream ${upstream} failed`,
    cause: err,
  };
}

/** Status + headers + body of a proxy error, shared by the response and raw-socket writers. */
function errorPayload(code: ProxyErrorCode, message: string, upstream: string | undefined) {
  return JSON.stringify(proxyErrorBody(code, message, upstream));
}

export interface SendProxyErrorOptions {
  retryAfterSeconds?: number | undefined;
  /** Close the client connection after this answer (unread request body, draining, …). */
  close?: boolean;
  /** Extra headers (e.g. `allow` on 405); an array becomes one field line per value. */
  headers?: Record<string, string | string[]> | undefined;
}

/**
 * Answers with the proxy's error shape. If the response already started (an upstream failure
 * mid-body), the status can't change any more: the client connection is destroyed instead so
 * the client sees a truncated response, never a silently short one.
 */
export function sendProxyError(
  res: ServerResponse,
  code: ProxyErrorCode,
  message: string,
  upstream: string | undefined,
  options: SendProxyErrorOptions = {},
): void {
  if (res.headersSent || res.destroyed) {
    res.destroy();
    return;
  }
  const body = errorPayload(code, message, upstream);
  const headers: Record<string, string | string[] | number> = {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "cache-control": "no-store",
    "bearer-proxy-error": code,
    ...options.headers,
  };
  if (options.retryAfterSeconds !== undefined) {
    headers["retry-after"] = Math.max(0, Math.ceil(options.retryAfterSeconds));
  }
  if (options.close) headers.connection = "close";
  res.writeHead(PROXY_ERROR_STATUS[code], headers);
  res.end(body);
}

const REASON: Partial<Record<number, string>> = {
  400: "Bad Request",
  403: "Forbidden",
  407: "Proxy Authentication Required",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
  405: "Method Not Allowed",
  408: "Request Timeout",
  414: "URI Too Long",
  431: "Request Header Fields Too Large",
  501: "Not Implemented",
};

/**
 * The status line's reason phrase for a refused CONNECT. Most clients print only the status line
 * of a failed tunnel (Python: "Tunnel connection failed: 405 …", wget: "Proxy tunneling failed:
 * …"), never the body, so the phrase says what to do (RFC 9112 §4 allows any visible text).
 */
export const CONNECT_REASON =
  "CONNECT refused - use http:// URLs, bearer-proxy forwards them over HTTPS";

/** How long a socket we answered on the raw path may linger before it is destroyed. */
const RAW_LINGER_MS = 1_000;

/**
 * Writes a proxy error straight onto a socket and closes it: for parse errors (`clientError`)
 * and CONNECT, where Node hands us the socket, not a response. The socket keeps reading (and
 * discarding) for a moment so unread client bytes don't turn our FIN into an RST that would
 * swallow the answer (lingering close, as nginx does).
 */
export function writeRawProxyError(
  socket: Duplex,
  code: ProxyErrorCode,
  message: string,
  extraHeaders = "",
  /** Replaces the standard reason phrase (see CONNECT_REASON). */
  reason?: string,
  /** The upstream the request was for, when it got that far (a refused intercepted CONNECT). */
  upstream?: string,
): void {
  // A socket Node handed over ('connect') has no error listener left: a client reset would
  // otherwise be an uncaught exception.
  socket.on("error", discard);
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const status = PROXY_ERROR_STATUS[code];
  const body = errorPayload(code, message, upstream);
  socket.end(
    `HTTP/1.1 ${status} ${reason ?? REASON[status] ?? "Error"}\r\n` +
      "content-type: application/json\r\n" +
      `content-length: ${Buffer.byteLength(body)}\r\n` +
      "cache-control: no-store\r\n" +
      `bearer-proxy-error: ${code}\r\n` +
      extraHeaders +
      "connection: close\r\n\r\n" +
      body,
  );
  // Node's parser listener goes: it would only report the same error for every later chunk.
  socket.removeAllListeners("data");
  socket.on("data", discard);
  socket.resume();
  const timer = setTimeout(() => socket.destroy(), RAW_LINGER_MS);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
}

function discard(): void {}
