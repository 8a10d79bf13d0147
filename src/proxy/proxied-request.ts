/**
 * One client request on its way through the pipeline, whatever way it came in (a plain request,
 * an Upgrade): what the stages learned about it (target, route, caller, token, body, turn), and
 * the one boundary every answer leaves through — `fail` for the proxy's own error answers,
 * `finish` once the exchange ended — with the one access line and the metrics that go with it.
 * Whoever is working on the request (a token or body wait, the pacing turn, the exchange) hooks
 * itself in here so that a client hang-up reaches it.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import { PROXY_ERROR_STATUS, type ProxyErrorCode } from "../errors.js";
import type { ServerSpan, Tracing } from "../observability/tracing.js";
import type { AccessToken } from "../token/token-provider.js";
import type { CredentialSlots } from "./credential.js";
import { type MappedProxyError, sendProxyError } from "./proxy-errors.js";
import type { BodyPlan } from "./request-body.js";
import type { AcceptedTarget } from "./request-guards.js";
import type { RequestRecorder } from "./request-log.js";
import type { Route } from "./routing/route.js";
import { type Tunnel, tunnelOf } from "./tunnel.js";

/** Label used when a request was refused before it reached an upstream. */
export const NO_UPSTREAM = "none";

/** How the request came in: its exchange ends in a response, or in a 101 and a relay. */
export type RequestKind = "request" | "upgrade";

export interface FailExtra {
  headers?: Record<string, string | string[]> | undefined;
  retryAfterSeconds?: number | undefined;
  cause?: unknown;
  /** End the client connection after this answer. */
  close?: boolean;
}

/** How a request ended, for the access line and the metrics. */
export interface Outcome {
  status: number;
  /** Response body bytes relayed to the client (a tunnel's bytes out, for an upgrade). */
  bytesOut?: number | undefined;
  errorCode: string | undefined;
  /** The failure behind errorCode, reduced to codes and message in the access line. */
  cause: unknown;
}

/** Shared by every request of one way in (a listener's generation). */
export interface RequestContext {
  recordRequest: RequestRecorder;
  /** One SERVER span per request (a shared no-op when tracing is off). */
  tracing: Tracing;
  /** True once every response must carry `Connection: close` (closing, draining). */
  closingAll(): boolean;
  /** Called exactly once per request, when it is finished (answered, failed or abandoned). */
  onFinished(request: ProxiedRequest): void;
  /** It starts waiting for a pacing turn: out of its way in's load while it waits. */
  leaveLoad(request: ProxiedRequest): void;
  /**
   * Its turn came after a wait: it counts in its load again. False when it may not — it has
   * been answered then.
   */
  resumeLoad(request: ProxiedRequest): boolean;
}

const noBytes = () => 0;

/** What a request knows of its exchange while it runs (exchange/exchange.ts). */
export interface ExchangeUnderWay {
  /** The client hung up: abort the upstream request and finish. */
  abortFromClient(): void;
}

export class ProxiedRequest {
  readonly startMs = performance.now();
  readonly method: string;
  /** Set when the request came in through a terminated CONNECT: its upstream and caller. */
  readonly tunnel: Tunnel | undefined;

  // The door (guard stage).
  /** Where the client sent it: authority and the normalized path. */
  target: AcceptedTarget | undefined = undefined;
  /** The path without its query string, for the log and spans; "" until the guards passed. */
  pathname = "";

  // The route (route stage).
  route: Route | undefined = undefined;
  upstreamName = NO_UPSTREAM;
  routed = false;
  /** Path and query as sent upstream. */
  upstreamPath = "";
  /** The forwarded header list; the credential slots are filled per attempt. */
  headers: string[] = [];
  slots: CredentialSlots = { authorizationIndex: -1, dpopIndex: -1 };
  /** How the body travels (plain requests). */
  bodyPlan: BodyPlan = NO_BODY;
  /** Largest body this request may send (0: none). */
  maxBodyBytes = 0;
  /** The `Upgrade` value sent upstream: the requested protocols the upstream allows. */
  upgradeProtocols = "";

  // The caller gate.
  /** Who is asking, once an `allow` list identified the caller (`user:…`, `sa:…`, `addr:…`). */
  caller: string | undefined = undefined;

  // The token, the body and the pacing turn.
  token: AccessToken | undefined = undefined;
  /** A Buffer (replayable), a stream (not), or null for no body. */
  body: Buffer | Readable | null = null;
  /** Request body bytes received so far. */
  bytesIn: () => number = noBytes;
  /** The pacing budget the request spends, resends included ("" without pacing). */
  paceKey = "";
  /** The `RateLimit` value of the request's admission (sent with `RateLimit-Policy`). */
  rateLimit: string | undefined = undefined;
  /** ms the pacing gate held the request (its turn, an upstream's pause, resends' turns). */
  waitMs = 0;

  // The exchange.
  /** Requests sent upstream for this one (retries and replays included); 0: none was sent. */
  attempts = 0;
  /** The request was sent again with a new token after a 401. */
  replayed = false;
  /** Set while waiting for a token, a body or a turn; aborted when the client hangs up. */
  abortWait: AbortController | undefined = undefined;
  /**
   * Set while an exchange runs: it answers the hang-up (and finishes) itself. The exchange
   * itself, not a closure around it: a closure made per request and seldom called kept every
   * request's objects alive through two scavenges, into the old generation (bench/PROFILE.md,
   * "The promoted request").
   */
  exchange: ExchangeUnderWay | undefined = undefined;

  /**
   * Where it stands in its pipeline (pipeline.ts: an index into the stage list). A field, not a
   * property added by the pipeline: that would change the object's shape on every request.
   */
  stageIndex = 0;
  /** Counted in its way in's load (`limits.maxInFlight` or `maxUpgrades`). */
  admitted = false;
  /** The answer was given (or the client left): no stage touches the request any more. */
  answered = false;
  /** Recorded in the log and metrics; for an upgrade, when its tunnel closed. */
  finished = false;

  private serverSpan: ServerSpan | undefined;
  private readonly hasBody: boolean;

  constructor(
    readonly kind: RequestKind,
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    private readonly ctx: RequestContext,
  ) {
    this.method = req.method ?? "GET";
    this.tunnel = tunnelOf(req.socket);
    // A body still unread when we answer would have to be drained: close instead. (A request
    // without a body is not "complete" yet while its 'request' event runs, hence the check.)
    this.hasBody =
      req.headers["transfer-encoding"] !== undefined ||
      (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");
  }

  /** The client connection must end after this answer. */
  closeConnection(): boolean {
    // An upgrade's connection has no parser left: it closes after any answer but a 101.
    if (this.kind === "upgrade") return true;
    return this.ctx.closingAll() || (this.hasBody && !this.req.complete);
  }

  /** The SERVER span (continuing the client's `traceparent`), started on first use. */
  get span(): ServerSpan {
    this.serverSpan ??= this.ctx.tracing.startServerSpan(this.req);
    return this.serverSpan;
  }

  /** True when the request carries a body (Content-Length > 0 or Transfer-Encoding). */
  get carriesBody(): boolean {
    return this.hasBody;
  }

  /** Waiting for a pacing turn: out of its load meanwhile (base/waiting-room.ts). */
  leaveLoad(): void {
    this.ctx.leaveLoad(this);
  }

  /** Back from a wait: in its load again; false when it was refused that (and answered). */
  resumeLoad(): boolean {
    return this.ctx.resumeLoad(this);
  }

  /** The request now belongs to `route` (counted in flight for its upstream). */
  markRouted(route: Route): void {
    this.route = route;
    this.upstreamName = route.name;
    this.routed = true;
    this.span.setUpstream(route.name);
    this.ctx.recordRequest.markInFlight(route.name);
  }

  /**
   * The client got its answer's head from the upstream and the request goes on without a
   * parser: an upgrade's 101. Its SERVER span ends here, with the answer, not with the tunnel:
   * a span open for hours would reach the collector late or never and read as the request's
   * latency. The access line comes when the tunnel closes (`finish`).
   */
  answeredWith(status: number): void {
    if (this.answered) return;
    this.answered = true;
    this.endSpan(status, undefined);
  }

  /** Ends the request: the one access line and the metrics. Exactly once. */
  finish(outcome: Outcome): void {
    if (this.finished) return;
    if (!this.answered) {
      this.answered = true;
      this.endSpan(outcome.status, outcome.errorCode);
    }
    this.finished = true;
    this.ctx.onFinished(this);
    const span = this.serverSpan;
    this.ctx.recordRequest({
      upstream: this.upstreamName,
      routed: this.routed,
      method: this.method,
      pathname: this.pathname,
      status: outcome.status,
      startMs: this.startMs,
      bytesIn: this.bytesIn(),
      bytesOut: outcome.bytesOut ?? 0,
      replayed: this.replayed,
      errorCode: outcome.errorCode,
      cause: outcome.cause,
      caller: this.caller,
      via: this.tunnel === undefined ? undefined : "connect",
      traceId: span?.traceId,
      spanId: span?.spanId,
      waitMs: this.waitMs,
      attempts: this.attempts,
    });
  }

  /**
   * The error boundary: answers with the proxy's error contract and finishes. If the response
   * already started (an upstream failure mid-body) the connection is cut instead, so the client
   * sees a truncated response, never a silently short one.
   */
  fail(code: ProxyErrorCode, message: string, extra: FailExtra = {}, bytesOut = 0): void {
    if (this.answered) return;
    const started = this.res.headersSent;
    const upstream = this.upstreamName === NO_UPSTREAM ? undefined : this.upstreamName;
    sendProxyError(this.res, code, message, upstream, {
      headers: extra.headers,
      retryAfterSeconds: extra.retryAfterSeconds,
      close: extra.close === true || this.closeConnection(),
    });
    this.finish({
      status: started ? this.res.statusCode : PROXY_ERROR_STATUS[code],
      bytesOut,
      errorCode: code,
      cause: extra.cause,
    });
  }

  /** `fail` with a failure already mapped to the contract (proxy-errors.ts). */
  failWith(mapped: MappedProxyError, bytesOut = 0): void {
    this.fail(
      mapped.code,
      mapped.message,
      { retryAfterSeconds: mapped.retryAfterSeconds, cause: mapped.cause },
      bytesOut,
    );
  }

  /** The client went away before anything was answered. */
  finishClientClosed(status = 499): void {
    this.finish({ status, errorCode: "client_closed", cause: undefined });
  }

  /** The client hung up: whoever works on the request now stops, and it finishes. */
  clientClosed(): void {
    if (this.answered) return;
    this.abortWait?.abort();
    if (this.exchange) this.exchange.abortFromClient();
    else this.finishClientClosed();
  }

  private endSpan(status: number, errorCode: string | undefined): void {
    const span = this.span;
    // Refused by its upstream before it counted for it (an upgrade it does not allow).
    if (!this.routed && this.upstreamName !== NO_UPSTREAM) span.setUpstream(this.upstreamName);
    if (this.pathname) span.setPath(this.pathname);
    span.end(status, errorCode);
  }
}

const NO_BODY: BodyPlan = Object.freeze({ kind: "none" });
