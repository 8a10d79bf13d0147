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

/** Why reading the client's body stopped early. */
export class ClientBodyError extends Error {
  constructor(readonly reason: "timeout" | "aborted") {
    super(reason === "timeout" ? "request body stalled" : "client aborted the request body");
    this.name = "ClientBodyError";
  }
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
  idleMs: number,
): Promise<Buffer> {
  if (length === 0) return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const body = Buffer.allocUnsafe(length);
    let offset = 0;
    const timer = setTimeout(() => finish(new ClientBodyError("timeout")), idleMs);
    const onData = (chunk: Buffer) => {
      timer.refresh();
      chunk.copy(body, offset);
      offset += chunk.length;
    };
    const onEnd = () => finish(offset === length ? undefined : new ClientBodyError("aborted"));
    const onClose = () => finish(new ClientBodyError("aborted"));
    function finish(err: Error | undefined) {
      clearTimeout(timer);
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
  idleMs: number,
  onError: (err: ClientBodyError) => void,
): StreamedBody {
  const body = new PassThrough({ highWaterMark: 64 * 1024 });
  let done = false;
  let bytesRead = 0;
  const timer = setTimeout(onIdle, idleMs);
  function onIdle() {
    // Paused means the upstream side is slow to read: not the client's fault.
    if (req.isPaused()) timer.refresh();
    else fail(new ClientBodyError("timeout"));
  }
  function fail(err: ClientBodyError) {
    if (done) return;
    done = true;
    clearTimeout(timer);
    req.unpipe(body);
    body.destroy(err);
    onError(err);
  }
  req.on("data", (chunk: Buffer) => {
    bytesRead += chunk.length;
    timer.refresh();
  });
  req.once("end", () => {
    done = true;
    clearTimeout(timer);
  });
  req.once("close", () => {
    if (!req.complete) fail(new ClientBodyError("aborted"));
  });
  body.once("close", () => {
    clearTimeout(timer);
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
