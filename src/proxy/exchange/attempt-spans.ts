/**
 * The spans of an exchange (present only when tracing is on): a CLIENT span per attempt, child
 * of the request's SERVER span, with the status the upstream answered, and the attempt's
 * `traceparent` written into the forwarded headers in place of the client's, so the upstream
 * sees this attempt as its parent. An attempt's span ends when the attempt's fate is known —
 * resent, answered, failed, cut — which the exchange tells it (`endAttempt`, with the status it
 * saw).
 *
 * Not a layer: the exchange itself notes each attempt's answer, so a recorded request's
 * response goes the way a plain one's does (exchange → relay, the recovery layers built only
 * when an answer needs them) and the callbacks' call sites see one shape whatever the sampler
 * decided.
 */
import {
  type ClientSpan,
  type ServerSpan,
  writeTraceContext,
} from "../../observability/tracing.js";
import type { Route } from "../routing/route.js";
import type { AttemptSpans } from "./exchange.js";

export class AttemptSpanRecorder implements AttemptSpans {
  private attempt: ClientSpan | undefined;

  constructor(
    private readonly server: ServerSpan,
    private readonly route: Route,
    private readonly method: string,
    private readonly path: string,
  ) {}

  /** A new attempt goes out: its span starts, and its `traceparent` replaces the last one. */
  beginAttempt(headers: string[], resendCount: number): void {
    const upstream = this.route.config;
    this.attempt = this.server.startClientSpan(
      this.method,
      upstream.origin,
      this.path,
      upstream.name,
      resendCount,
    );
    writeTraceContext(headers, this.attempt);
  }

  /** Ends the current attempt's span, once, with its final status (0: no answer). */
  endAttempt(status: number, errorCode: string | undefined, protocolVersion?: string): void {
    const attempt = this.attempt;
    if (!attempt) return;
    this.attempt = undefined;
    attempt.end(
      status,
      errorCode,
      protocolVersion ?? (this.route.config.http2 ? undefined : "1.1"),
    );
  }
}
