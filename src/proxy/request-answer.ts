/**
 * Answering one client request: its state from arrival to the last byte (which upstream, bytes
 * in, finished or not), the proxy's own error answers, and the one log line + metrics when it
 * ends. Whoever is working on the request (waiting for a token or body, or the exchange) hooks
 * itself in here so a client hang-up reaches it.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { PROXY_ERROR_STATUS, type ProxyErrorCode } from "../errors.js";
import type { ServerSpan, Tracing } from "../observability/tracing.js";
import type { ExchangeOutcome } from "./forward.js";
import { sendProxyError } from "./proxy-errors.js";
import type { RequestRecorder } from "./request-log.js";

/** Label used when a request was refused before it reached an upstream. */
export const NO_UPSTREAM = "none";

export interface FailExtra {
  headers?: Record<string, string | string[]> | undefined;
  retryAfterSeconds?: number | undefined;
  cause?: unknown;
  /** End the client connection after this answer. */
  close?: boolean;
}

/** Shared by every request of a listener. */
export interface AnswerContext {
  recordRequest: RequestRecorder;
  /** One SERVER span per request (a shared no-op when tracing is off). */
  tracing: Tracing;
  /** True once every response must carry `Connection: close` (closing, draining). */
  closingAll(): boolean;
  /** Called exactly once per request, when it is finished (answered, failed or abandoned). */
  onFinished(answer: RequestAnswer): void;
}

type FinishOutcome = Omit<ExchangeOutcome, "bytesOut"> & { bytesOut?: number };

const noBytes = () => 0;

export class RequestAnswer {
  readonly startMs = performance.now();
  readonly method: string;
  upstreamName = NO_UPSTREAM;
  pathname = "";
  routed = false;
  /** Who is asking, once an `allow` list identified the caller (`user:…`, `sa:…`, `addr:…`). */
  caller: string | undefined = undefined;
  /** Request body bytes received so far. */
  bytesIn: () => number = noBytes;
  /** ms the pacing gate held the request (its turn, an upstream's pause, replays); 0: none. */
  waitMs = 0;
  /** Requests sent upstream for this one (retries and replays included); 0: none was sent. */
  attempts = 0;
  finished = false;
  /** Counted in the process load (limits.maxInFlight); false when refused as overloaded. */
  admitted = false;
  /** Set while waiting for a token or body; aborted when the client hangs up. */
  abortWait: AbortController | undefined;
  /** Set while an exchange runs: it answers the hang-up (and finishes) itself. */
  abortExchange: (() => void) | undefined;
  /** `closeConnection` bound once, for the exchange. */
  readonly closeConnection: () => boolean;
  /** The request's SERVER span (continuing the client's `traceparent`). */
  readonly span: ServerSpan;
  private readonly hasBody: boolean;

  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    private readonly ctx: AnswerContext,
  ) {
    this.method = req.method ?? "GET";
    this.span = ctx.tracing.startServerSpan(req);
    // A body still unread when we answer would have to be drained: close instead. (A request
    // without a body is not "complete" yet while its 'request' event runs, hence the check.)
    this.hasBody =
      req.headers["transfer-encoding"] !== undefined ||
      (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");
    this.closeConnection = () => this.ctx.closingAll() || (this.hasBody && !this.req.complete);
    // `on`, not `once`: a response closes once, and `once` costs a wrapper per request.
    res.on("close", () => this.onResponseClose());
  }

  /** The request now belongs to `upstream` (counted in flight for it). */
  markRouted(upstream: string): void {
    this.upstreamName = upstream;
    this.routed = true;
    this.span.setUpstream(upstream);
    this.ctx.recordRequest.markInFlight(upstream);
  }

  finish(outcome: FinishOutcome): void {
    if (this.finished) return;
    this.finished = true;
    if (this.pathname) this.span.setPath(this.pathname);
    this.span.end(outcome.status, outcome.errorCode);
    this.ctx.onFinished(this);
    this.ctx.recordRequest({
      upstream: this.upstreamName,
      routed: this.routed,
      method: this.method,
      pathname: this.pathname,
      status: outcome.status,
      startMs: this.startMs,
      bytesIn: this.bytesIn(),
      bytesOut: outcome.bytesOut ?? 0,
      replayed: outcome.replayed,
      errorCode: outcome.errorCode,
      cause: outcome.cause,
      caller: this.caller,
      traceId: this.span.traceId,
      spanId: this.span.spanId,
      waitMs: this.waitMs,
      attempts: this.attempts,
    });
  }

  /** Answers with the proxy's error contract and finishes. */
  fail(code: ProxyErrorCode, message: string, extra: FailExtra = {}): void {
    const upstream = this.upstreamName === NO_UPSTREAM ? undefined : this.upstreamName;
    sendProxyError(this.res, code, message, upstream, {
      headers: extra.headers,
      retryAfterSeconds: extra.retryAfterSeconds,
      close: extra.close === true || this.closeConnection(),
    });
    this.finish({
      status: PROXY_ERROR_STATUS[code],
      replayed: false,
      errorCode: code,
      cause: extra.cause,
    });
  }

  /** The client went away before anything was answered. */
  finishClientClosed(): void {
    this.finish({ status: 499, replayed: false, errorCode: "client_closed", cause: undefined });
  }

  private onResponseClose(): void {
    if (this.res.writableFinished) return;
    this.abortWait?.abort();
    if (this.abortExchange) this.abortExchange();
    else this.finishClientClosed();
  }
}
