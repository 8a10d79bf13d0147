/**
 * An exchange is built from layers, each a decorator of the next one's response callbacks, the
 * way undici composes its interceptors (`lib/handler/decorator-handler.js` passes everything it
 * does not change; `lib/interceptor/retry.js` decorates the next handler). The callbacks are
 * undici's original handler API (onHeaders/onData/onComplete/onError/onUpgrade), which the
 * dispatcher core calls directly; the exchange (exchange.ts) receives them first and hands them
 * to its outermost layer, after checking the attempt still matters. The innermost is the sink:
 * the relay that writes the client's response (response-relay.ts).
 *
 * A layer that sends the request again (retry, token replay) asks the exchange, which makes the
 * next attempt: the credential is written anew, the pacer asked for a turn, a new span started.
 */
import type { Duplex } from "node:stream";
import type { RawHeaders } from "../../net/raw-headers.js";

/** The response callbacks of one attempt, as undici calls them (connection-level ones aside). */
export interface AttemptHandler {
  /** Returns false to pause the upstream until `resume` (undici's backpressure contract). */
  onHeaders(
    statusCode: number,
    rawHeaders: RawHeaders,
    resume: () => void,
    statusText: string,
  ): boolean;
  /** Returns false to pause the upstream until `resume`. */
  onData(chunk: Buffer): boolean;
  onComplete(trailers: RawHeaders | null): void;
  onError(err: Error): void;
  /** A 101 to an Upgrade request: the upstream connection is handed over. */
  onUpgrade(statusCode: number, rawHeaders: RawHeaders, socket: Duplex): void;
}

/** Passes every callback to the next layer; a layer overrides what it changes. */
export class ExchangeLayer implements AttemptHandler {
  constructor(protected readonly next: AttemptHandler) {}

  onHeaders(
    statusCode: number,
    rawHeaders: RawHeaders,
    resume: () => void,
    statusText: string,
  ): boolean {
    return this.next.onHeaders(statusCode, rawHeaders, resume, statusText);
  }

  onData(chunk: Buffer): boolean {
    return this.next.onData(chunk);
  }

  onComplete(trailers: RawHeaders | null): void {
    this.next.onComplete(trailers);
  }

  onError(err: Error): void {
    this.next.onError(err);
  }

  onUpgrade(statusCode: number, rawHeaders: RawHeaders, socket: Duplex): void {
    this.next.onUpgrade(statusCode, rawHeaders, socket);
  }
}
