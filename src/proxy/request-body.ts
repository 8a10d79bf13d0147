/**
 * The client's request body, two ways:
 * - small (Content-Length ≤ the upstream's replayBodyLimit): read whole into one Buffer. It is
 *   the 401-replay copy, and dispatching a Buffer means undici has finished writing when the
 *   upstream answers — an upstream that answers before reading the body (an early 401/413) then
 *   keeps its keep-alive connection instead of costing a TLS handshake per request;
 * - large or chunked: streamed with backpressure, not replayable.
 * Both enforce an idle timeout on the client (a stalled upload is aborted), not counting time
 * the client is paused because the upstream is slow to read.
 */
import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { type MinDataRate, watchUploadRate } from "./data-rate.js";

/** Why reading the client's body stopped early. */
export type ClientBodyFailure = "timeout" | "aborted" | "too_slow" | "too_large";

const FAILURE_MESSAGE: Record<ClientBodyFailure, string> = {
  timeout: "request body stalled",
  aborted: "client aborted the request body",
  too_slow: "request body arrived slower than limits.minRequestBodyRate",
  too_large: "request body larger than the maxRequestBodySize limit",
};

export class ClientBodyError extends Error {
  constructor(readonly reason: ClientBodyFailure) {
    super(FAILURE_MESSAGE[reason]);
    this.name = "ClientBodyError";
  }
}

/** Limits on reading a body besides its idle timeout. */
export interface BodyReadLimits {
  idleMs: number;
  minRate: MinDataRate;
  /** Largest body; 0 for none (declared lengths are checked before reading). */
  maxBytes: number;
}

/** How the request body will be sent. */
export type BodyPlan =
  | { kind: "none" }
  | { kind: "buffer"; length: number }
  | { kind: "stream"; length: number | undefined };

/**
 * Decides from the framing headers (already validated by llhttp and the guards): no body, a
 * bufferable one, or a stream.
 */
export function planBody(req: IncomingMessage, replayLimitBytes: number): BodyPlan {
  if (req.headers["transfer-encoding"] !== undefined) return { kind: "stream", length: undefined };
  const header = req.headers["content-length"];
  if (header === undefined) return { kind: "none" };
  const length = Number(header);
  if (length === 0) return { kind: "buffer", length: 0 };
  return length <= replayLimitBytes ? { kind: "buffer", length } : { kind: "stream", length };
}

/** Reads exactly `length` bytes (llhttp enforces Content-Length) into one Buffer. */
export function readBodyToBuffer(
  req: IncomingMessage,
  length: number,
  limits: BodyReadLimits,
): Promise<Buffer> {
  if (length === 0) return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const body = Buffer.allocUnsafe(length);
    let offset = 0;
    const timer = setTimeout(() => finish(new ClientBodyError("timeout")), limits.idleMs);
    const rate = watchUploadRate(
      limits.minRate,
      () => offset,
      () => false,
      () => finish(new ClientBodyError("too_slow")),
    );
    const onData = (chunk: Buffer) => {
      timer.refresh();
      chunk.copy(body, offset);
      offset += chunk.length;
    };
    const onEnd = () => finish(offset === length ? undefined : new ClientBodyError("aborted"));
    const onClose = () => finish(new ClientBodyError("aborted"));
    function finish(err: Error | undefined) {
      clearTimeout(timer);
      rate.stop();
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("close", onClose);
      req.off("error", onClose);
      if (err) reject(err);
      else resolve(body);
    }
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("close", onClose);
    req.on("error", onClose);
  });
}

/**
 * A stream undici can consume, fed from the client request with backpressure. The request isn't
 * handed to undici directly: undici destroys its body when the upstream answers early or fails,
 * and destroying an IncomingMessage destroys the client socket before our answer is flushed.
 * `onError` is told when the client stalls or goes away (the stream is then destroyed too).
 */
export function streamBody(
  req: IncomingMessage,
  limits: BodyReadLimits,
  onError: (err: ClientBodyError) => void,
): StreamedBody {
  const body = new PassThrough({ highWaterMark: 64 * 1024 });
  // Failures are reported through `onError`; the stream's own 'error' must never go unheard:
  // while the request waits in undici's pool queue nothing else listens (that was a crash).
  body.on("error", ignore);
  let done = false;
  let bytesRead = 0;
  const timer = setTimeout(onIdle, limits.idleMs);
  const rate = watchUploadRate(
    limits.minRate,
    () => bytesRead,
    () => req.isPaused(),
    () => fail(new ClientBodyError("too_slow")),
  );
  function onIdle() {
    // Paused means the upstream side is slow to read: not the client's fault.
    if (req.isPaused()) timer.refresh();
    else fail(new ClientBodyError("timeout"));
  }
  function fail(err: ClientBodyError) {
    if (done) return;
    done = true;
    clearTimeout(timer);
    rate.stop();
    req.unpipe(body);
    body.destroy(err);
    onError(err);
  }
  req.on("data", (chunk: Buffer) => {
    bytesRead += chunk.length;
    timer.refresh();
    if (limits.maxBytes > 0 && bytesRead > limits.maxBytes) fail(new ClientBodyError("too_large"));
  });
  req.once("end", () => {
    done = true;
    clearTimeout(timer);
    rate.stop();
  });
  req.once("close", () => {
    if (!req.complete) fail(new ClientBodyError("aborted"));
  });
  body.once("close", () => {
    clearTimeout(timer);
    rate.stop();
    // undici gave up on the body (early answer, upstream error): stop reading the client.
    if (!done) {
      done = true;
      req.unpipe(body);
    }
  });
  req.pipe(body);
  return { stream: body, bytesRead: () => bytesRead };
}

export interface StreamedBody {
  stream: PassThrough;
  /** Bytes received from the client so far. */
  bytesRead(): number;
}

function ignore(): void {}
