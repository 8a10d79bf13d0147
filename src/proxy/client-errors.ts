/**
 * Answers to requests Node's parser (llhttp, strict) refused before we ever saw them: CL+TE,
 * duplicate or invalid Content-Length, obs-fold, bare CR, invalid tokens, oversized header
 * blocks, headers that took too long. Each gets a precise status, our error shape and
 * `Connection: close` — the connection's framing can't be trusted any more, so nothing more is
 * read from it and nothing after the bad bytes reaches an upstream.
 */
import type { Duplex } from "node:stream";
import type { ProxyErrorCode } from "../errors.js";
import { isLingering } from "./lingering-close.js";
import { writeRawProxyError } from "./proxy-errors.js";

export interface ClientErrorAnswer {
  code: ProxyErrorCode;
  message: string;
}

/** Longest wait for earlier pipelined responses before a parse error is answered. */
const PIPELINE_DRAIN_MS = 30_000;

/** Marks a socket already answered: llhttp reports an error again for every later chunk. */
const kAnswered = Symbol("bearer-proxy.client-error-answered");

/** Maps a `clientError` to our answer, or undefined when the client is gone (just close). */
export function mapClientError(err: NodeJS.ErrnoException): ClientErrorAnswer | undefined {
  switch (err.code) {
    case "ECONNRESET":
    case "EPIPE":
    case "HPE_INVALID_EOF_STATE":
      return undefined;
    case "HPE_HEADER_OVERFLOW":
      return { code: "header_fields_too_large", message: "request header block too large" };
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { code: "request_timeout", message: "request headers not received in time" };
    case "HPE_UNEXPECTED_CONTENT_LENGTH":
    case "HPE_INVALID_CONTENT_LENGTH":
      return { code: "bad_request", message: "invalid or conflicting Content-Length" };
    case "HPE_INVALID_TRANSFER_ENCODING":
      return {
        code: "bad_request",
        message: "invalid Transfer-Encoding (must end with chunked, and not with Content-Length)",
      };
    case "HPE_INVALID_VERSION":
      return { code: "bad_request", message: "only HTTP/1.0 and HTTP/1.1 are supported" };
    case "HPE_INVALID_URL":
      return { code: "bad_request", message: "invalid request target" };
    case "HPE_INVALID_METHOD":
      return { code: "bad_request", message: "invalid request method" };
    case "HPE_INVALID_HEADER_TOKEN":
    case "HPE_LF_EXPECTED":
    case "HPE_CR_EXPECTED":
      return { code: "bad_request", message: "malformed header field" };
    case "HPE_INVALID_CHUNK_SIZE":
      return { code: "bad_request", message: "malformed chunked body" };
    default:
      return { code: "bad_request", message: "malformed request" };
  }
}

type HttpSocket = Duplex & {
  _httpMessage?: (NodeJS.EventEmitter & { req?: { complete?: boolean } }) | null;
};

/**
 * Calls `then` once no response is being written on `socket` (earlier pipelined requests are
 * answered), or `cut` if one of them has a body the parse error fell into: its framing is lost.
 */
function afterPendingResponses(socket: HttpSocket, then: () => void, cut: () => void): void {
  const current = socket._httpMessage;
  if (!current) {
    then();
    return;
  }
  if (current.req?.complete === false) {
    cut();
    return;
  }
  let fired = false;
  const next = () => {
    if (fired) return;
    fired = true;
    // Node assigns the next queued response in its own 'finish' listener; look again after it.
    setImmediate(() => afterPendingResponses(socket, then, cut));
  };
  current.once("finish", next);
  current.once("close", next);
}

/**
 * The `clientError` listener. Requests parsed before the bad bytes are valid and get their
 * answers first (reading stops at once); then the error answer, then the connection closes.
 * A request whose own body turned out malformed (bad chunk) is cut off with the connection.
 */
export function answerClientError(
  err: NodeJS.ErrnoException,
  socket: Duplex,
  onAnswer?: (answer: ClientErrorAnswer) => void,
): void {
  // Answered and closing: whatever Node's parser still reports (the body cut off by the
  // client's FIN, a headers timeout) is about bytes the linger discards (lingering-close.ts).
  if (isLingering(socket)) return;
  const marked = socket as Duplex & { [kAnswered]?: true };
  if (marked[kAnswered]) return;
  marked[kAnswered] = true;
  const answer = mapClientError(err);
  if (!answer || !socket.writable) {
    socket.destroy();
    return;
  }
  onAnswer?.(answer);
  socket.pause();
  const timer = setTimeout(() => socket.destroy(), PIPELINE_DRAIN_MS);
  timer.unref();
  afterPendingResponses(
    socket as HttpSocket,
    () => {
      clearTimeout(timer);
      if (socket.writable) writeRawProxyError(socket, answer.code, answer.message);
      else socket.destroy();
    },
    () => {
      clearTimeout(timer);
      socket.destroy();
    },
  );
}
