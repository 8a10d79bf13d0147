/**
 * The spans of an exchange (present only when tracing is on): a CLIENT span per attempt, child
 * of the request's SERVER span, with the status the upstream answered, and the attempt's
 * `traceparent` written into the forwarded headers in place of the client's, so the upstream
 * sees this attempt as its parent. An attempt's span ends when the attempt's fate is known —
 * resent, answered, failed, cut — which the exchange tells it (`endAttempt`).
 */
import type { RawHeaders } from "../../net/raw-headers.js";
import {
  type ClientSpan,
  type ServerSpan,
  writeTraceContext,
} from "../../observability/tracing.js";
import type { Route } from "../routing/route.js";
import { type AttemptHandler, ExchangeLayer } from "./layer.js";

export class SpanLayer extends ExchangeLayer {
  private attempt: ClientSpan | undefined;
  /** The status the upstream answered the current attempt with (0: none yet). */
  private attemptStatus = 0;

  constructor(
    next: AttemptHandler,
    private readonly server: ServerSpan,
    private readonly route: Route,
    private readonly method: string,
    private readonly path: string,
  ) {
    super(next);
  }

  /** A new attempt goes out: its span starts, and its `traceparent` replaces the last one. */
  beginAttempt(headers: string[], resendCount: number): void {
    const upstream = this.route.config;
    this.attemptStatus = 0;
    this.attempt = this.server.startClientSpan(
      this.method,
      upstream.origin,
      this.path,
      upstream.name,
      resendCount,
    );
    writeTraceContext(headers, this.attempt);
  }

  /** Ends the current attempt's span, once. */
  endAttempt(errorCode: string | undefined, protocolVersion?: string): void {
    const attempt = this.attempt;
    if (!attempt) return;
    this.attempt = undefined;
    attempt.end(
      this.attemptStatus,
      errorCode,
      protocolVersion ?? (this.route.config.http2 ? undefined : "1.1"),
    );
  }

  override onHeaders(
    statusCode: number,
    rawHeaders: RawHeaders,
    resume: () => void,
    statusText: string,
  ): boolean {
    // Interim responses (1xx) are not the attempt's answer.
    if (statusCode >= 200) this.attemptStatus = statusCode;
    return this.next.onHeaders(statusCode, rawHeaders, resume, statusText);
  }

  override onUpgrade(
    statusCode: number,
    rawHeaders: RawHeaders,
    socket: import("node:stream").Duplex,
  ): void {
    this.attemptStatus = statusCode;
    this.next.onUpgrade(statusCode, rawHeaders, socket);
  }
}
