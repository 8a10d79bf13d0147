/**
 * A layer that may keep an attempt's answer back while it decides whether to send the request
 * again (the token replay holds a 401, the retry layer a 502–504): the held answer's body is
 * collected up to its limit (past it, it is the answer after all and passes through), and once
 * complete the layer decides — send again, or relay what it held as the client's answer.
 */
import type { RawHeaders } from "../../net/raw-headers.js";
import type { Exchange } from "./exchange.js";
import { HeldResponse } from "./held-response.js";
import { type AttemptHandler, ExchangeLayer } from "./layer.js";

export abstract class HoldingLayer extends ExchangeLayer {
  /** The answer kept back for the current attempt, until it is complete. */
  private held: HeldResponse | undefined;

  constructor(
    next: AttemptHandler,
    protected readonly exchange: Exchange,
  ) {
    super(next);
  }

  /** Keeps this attempt's answer back (called from `onHeaders` instead of passing it on). */
  protected hold(
    statusCode: number,
    rawHeaders: RawHeaders,
    resume: () => void,
    statusText: string,
  ): true {
    this.held = new HeldResponse(statusCode, rawHeaders, resume, statusText);
    return true;
  }

  /**
   * The held answer is complete and its attempt's span ended: send the request again, or call
   * `relay` to answer the client with it.
   */
  protected abstract decide(relay: () => void): void;

  override onData(chunk: Buffer): boolean {
    const held = this.held;
    if (held === undefined) return this.next.onData(chunk);
    if (held.add(chunk)) return true;
    // Too big to hold: it is the answer after all (no resend for this one).
    this.held = undefined;
    return held.releaseTo(this.next, false);
  }

  override onComplete(trailers: RawHeaders | null): void {
    const held = this.held;
    if (held === undefined) {
      this.next.onComplete(trailers);
      return;
    }
    this.held = undefined;
    held.trailers = trailers;
    this.exchange.endAttempt(undefined);
    this.decide(() => {
      // No resend will come: the held answer is the client's, unless the client left meanwhile.
      if (!this.exchange.finished) held.releaseTo(this.next, true);
    });
  }

  override onError(err: Error): void {
    // A held answer cut short: the failure is the answer (nothing of it was relayed).
    this.held = undefined;
    this.next.onError(err);
  }
}
