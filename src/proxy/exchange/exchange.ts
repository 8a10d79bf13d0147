/**
 * One request's exchange with its upstream: the attempts (the first, and any a layer asks for),
 * each dispatched with undici's handler API and its response passed through the layers to the
 * client — outermost first:
 *
 *   exchange (this file: attempts, queue deadline, hang-up; each attempt's CLIENT span and
 *             `traceparent` through attempt-spans.ts when tracing is on)
 *   → pacing-layer     Retry-After pauses the pacer; resends wait a turn   (every upstream)
 *   → token-replay     401: new token, one replay; DPoP nonce: one retry   (replayable body)
 *   → retry-layer      resets, refused connections, 502–504 when safe
 *   → sink             the client's answer: response-relay.ts, or an upgrade's 101 hand-off
 *
 * Without DPoP, pacing, token replay and retry are built only when an attempt first meets what
 * they act on (a 401, a 429, a 502–504, an error): a plain exchange that succeeds makes no layer
 * at all, its answer going from the exchange straight to the relay.
 *
 * Every attempt gets its credential from proxy/credential.ts (the one writer of
 * Authorization and DPoP), and errors leave through the request's one boundary
 * (`ProxiedRequest.fail`). Redirects are passed through, never followed: following would carry
 * the token elsewhere.
 */
import type { Duplex, Readable } from "node:stream";
import type { Dispatcher } from "undici";
import type { ProxyErrorCode } from "../../errors.js";
import type { RawHeaders } from "../../net/raw-headers.js";
import type { AccessToken } from "../../token/token-provider.js";
import { CredentialError } from "../credential.js";
import type { ExchangeUnderWay, ProxiedRequest } from "../proxied-request.js";
import { type MappedProxyError, mapUpstreamError } from "../proxy-errors.js";
import type { Route } from "../routing/route.js";
import type { AttemptHandler } from "./layer.js";
import type { QueueWaiter } from "./queue-deadlines.js";

/** How an exchange ended, for the request's access line. */
export interface ExchangeEnd {
  status: number;
  /** `client_closed`, `client_too_slow` (the connection was cut) or the proxy's error code. */
  errorCode: ProxyErrorCode | "client_closed" | "client_too_slow" | undefined;
  cause: unknown;
}

/** The recovery layers, built: the new outermost layer, and the roles the exchange calls. */
export interface BuiltRecoveries {
  head: AttemptHandler;
  retry: { cancel(): void };
  pacing: ResendTurns | undefined;
}

/**
 * Builds the recovery layers (pacing, token replay, retry) around `inner`: at the start, or —
 * without DPoP — only when an attempt first needs them (exchange-stage.ts).
 */
export interface RecoveryLayers {
  buildRecoveries(exchange: Exchange, inner: AttemptHandler): BuiltRecoveries;
}

/**
 * What the exchange asks of the layers built around it (exchange-stage.ts composes them); the
 * layers know the exchange, the exchange only these roles.
 */
export interface ExchangeLayers {
  /** The outermost layer: every attempt's callbacks go here. */
  head: AttemptHandler;
  /** Each attempt's span (attempt-spans.ts); undefined with tracing off. */
  span: AttemptSpans | undefined;
  /** The pacer's turn for a resend (pacing-layer.ts); undefined without pacing. */
  pacing: ResendTurns | undefined;
  /** A pending retry's backoff (retry-layer.ts). */
  retry: { cancel(): void } | undefined;
  /** The innermost layer: the client's answer (response-relay.ts). */
  relay: AttemptHandler & { readonly bytesOut: number; stop(): void };
  /**
   * Set while the recovery layers are still to be built: the first answer that one of them acts
   * on (a 401, a 429, a 502–504) or the first error builds them around the relay. Most exchanges
   * end without either, and so make no layer objects at all.
   */
  recoveries: RecoveryLayers | undefined;
}

/**
 * An answer a recovery layer may act on (undefined: an error, no answer): a 401 (token replay),
 * a 429 or 503 (its Retry-After pauses the pacer), a 502–504 (retry).
 */
function mayNeedRecovery(statusCode: number | undefined): boolean {
  return (
    statusCode === undefined ||
    statusCode === 401 ||
    statusCode === 429 ||
    (statusCode >= 502 && statusCode <= 504)
  );
}

export interface AttemptSpans {
  /** A new attempt goes out: its span starts, its `traceparent` is written into `headers`. */
  beginAttempt(headers: string[], resendCount: number): void;
  /** `status`: the attempt's final answer (0: none, or only interim 1xx heads). */
  endAttempt(status: number, errorCode: string | undefined, protocolVersion?: string): void;
}

export interface ResendTurns {
  /** Calls `exchange.attempt()` once the pacer gives it a turn (within `waitMs`), else `noTurn`. */
  takeTurn(exchange: Exchange, waitMs: number | undefined, noTurn: () => void): void;
}

/** How a layer wants the request sent again. */
export interface Resend {
  /** Through the dispatcher that keeps no idle connection (after a reset), this and later attempts. */
  fresh?: boolean | undefined;
  /**
   * The longest the resend may wait for its turn from the pacer: 0 for none (a retry never
   * queues), undefined for the pacer's `wait`.
   */
  waitMs: number | undefined;
  /** A 401 replay with a new token: counted as replayed once it goes (not if no turn came). */
  replay?: boolean | undefined;
}

export class Exchange implements Dispatcher.DispatchHandler, ExchangeUnderWay, QueueWaiter {
  readonly route: Route;
  /** The token the next attempt carries (a 401 replay changes it). */
  token: AccessToken;
  /** A Buffer or no body can be sent again; a stream can't. */
  readonly replayable: boolean;
  /** The upstream URL (DPoP proofs name it), made once, for DPoP only. */
  readonly proofUrl: string;
  finished = false;
  /** A final response head arrived in the current attempt (held or relayed). */
  headArrived = false;
  /** The current attempt's answer paused the pacer (a 429/503 with Retry-After). */
  paused = false;
  /** The current attempt's final status (0 until one arrives; 1xx heads are interim). */
  private attemptStatus = 0;
  private layers!: ExchangeLayers;
  /** undici's abort for the current attempt (set in onConnect). */
  private abortUpstream: ((err?: Error) => void) | undefined;
  /** Past it, a request still in the pool's queue fails (route.queueDeadlines keeps the time). */
  queueDeadlineMs = 0;
  queuePrev: QueueWaiter | undefined = undefined;
  queueNext: QueueWaiter | undefined = undefined;
  /** In route.queueDeadlines: from dispatch until undici hands the request a connection. */
  private queued = false;
  private useFresh = false;
  /** The next attempt is the 401 replay (request.replayed once it is sent). */
  private pendingReplay = false;
  /** Ends a resend's wait (for its turn, a new token) when the client hangs up. */
  private resendWait: AbortController | undefined;

  constructor(
    readonly request: ProxiedRequest,
    /** The `Upgrade` value to send; undefined for a plain request. */
    private readonly upgrade: string | undefined,
  ) {
    this.route = request.route!;
    this.token = request.token!;
    const body = request.body;
    this.replayable = body === null || Buffer.isBuffer(body);
    this.proofUrl =
      request.slots.dpopIndex >= 0 ? `${this.route.config.origin}${request.upstreamPath}` : "";
  }

  /** Sends the first attempt, with `layers` around the response. */
  start(layers: ExchangeLayers): void {
    this.layers = layers;
    this.request.exchange = this;
    this.attempt();
  }

  /** Bytes relayed to the client so far. */
  get bytesOut(): number {
    return this.layers.relay.bytesOut;
  }

  /** One attempt: the credential written, a span started, dispatched. */
  attempt(): void {
    const { request, route } = this;
    const upstream = route.config;
    this.abortUpstream = undefined;
    this.headArrived = false;
    this.paused = false;
    this.attemptStatus = 0;
    try {
      route.credential.inject(
        request.headers,
        request.slots,
        this.token,
        request.method,
        this.proofUrl,
      );
    } catch (err) {
      const message = err instanceof CredentialError ? err.message : "internal error";
      this.fail({ code: "internal_error", message, cause: err });
      return;
    }
    this.layers.span?.beginAttempt(request.headers, request.attempts);
    request.attempts++;
    if (this.pendingReplay) {
      this.pendingReplay = false;
      request.replayed = true;
    }
    const dispatcher = this.dispatcher();
    const options: Dispatcher.DispatchOptions = {
      origin: upstream.origin,
      path: request.upstreamPath,
      method: request.method,
      headers: request.headers,
      body: request.body as Buffer | Readable | null,
      headersTimeout: upstream.timeouts.responseHeadersMs,
      bodyTimeout: upstream.timeouts.bodyIdleMs,
      // The retry's connection is closed afterwards, so the fresh dispatcher never pools.
      reset: this.useFresh,
    };
    if (this.upgrade !== undefined) options.upgrade = this.upgrade;
    try {
      dispatcher.dispatch(options, this);
    } catch (err) {
      this.fail(mapUpstreamError(err, upstream.name));
      return;
    }
    // With a free pooled connection undici writes the request inside `dispatch` (onConnect ran
    // already): only a request left waiting in the pool's queue needs the deadline.
    if (this.abortUpstream === undefined && !this.finished) this.startQueueDeadline();
  }

  private dispatcher(): Dispatcher {
    if (this.upgrade !== undefined) return this.route.upgradeDispatcher;
    return this.useFresh ? this.route.freshDispatcher : this.route.dispatcher;
  }

  /**
   * Sends the request again, after the pacer gave it a turn (the upstream counts every copy):
   * at once when one is free, after a wait of up to `resend.waitMs`, or not at all — then
   * `noTurn` runs (the layer answers with what it held).
   */
  resend(resend: Resend, noTurn: () => void): void {
    this.stopQueueDeadline();
    if (resend.fresh) this.useFresh = true;
    if (resend.replay) this.pendingReplay = true;
    const pacing = this.layers.pacing;
    if (pacing === undefined) {
      this.attempt();
      return;
    }
    pacing.takeTurn(this, resend.waitMs, () => {
      this.pendingReplay = false;
      noTurn();
    });
  }

  /** Sends the request again at once, without asking the pacer (the first retry after a reset). */
  resendNow(fresh: boolean): void {
    this.stopQueueDeadline();
    if (fresh) this.useFresh = true;
    this.attempt();
  }

  /**
   * The current attempt is over before it got a connection (a refused connection never reaches
   * onConnect): its queue deadline must not fire during a retry's backoff or turn.
   */
  stopQueueDeadline(): void {
    if (!this.queued) return;
    this.queued = false;
    this.route.queueDeadlines.remove(this);
  }

  /** Made only when a resend has to wait (for its turn, or a new token); a hang-up aborts it. */
  resendSignal(): AbortSignal {
    this.resendWait ??= new AbortController();
    return this.resendWait.signal;
  }

  /** Ends the current attempt's span (an attempt resent ends before the next). */
  endAttempt(errorCode: string | undefined, protocolVersion?: string): void {
    this.layers.span?.endAttempt(this.attemptStatus, errorCode, protocolVersion);
  }

  /** The client went away: abort the upstream request and stop. */
  abortFromClient(): void {
    if (this.finished) return;
    const { res } = this.request;
    // finish() first: the abort calls onError synchronously, which must see us finished.
    this.finish({
      status: res.headersSent ? res.statusCode : 499,
      errorCode: "client_closed",
      cause: undefined,
    });
    this.abortUpstream?.(new Error("client closed the connection"));
    this.resendWait?.abort(new Error("client closed the connection"));
  }

  /** The relay stopped reading the upstream for good (the client too slow): abort the attempt. */
  abortAttempt(reason: Error): void {
    this.abortUpstream?.(reason);
  }

  /** The exchange ended (answered, or cut): the request finishes with it. */
  finish(end: ExchangeEnd): void {
    if (!this.stop(end.errorCode)) return;
    this.request.finish({
      status: end.status,
      bytesOut: this.bytesOut,
      errorCode: end.errorCode,
      cause: end.cause,
    });
  }

  /** Answers with the proxy's error contract (or cuts a response already started). */
  fail(mapped: MappedProxyError): void {
    if (!this.stop(mapped.code)) return;
    this.request.failWith(mapped, this.bytesOut);
  }

  /**
   * The upstream answered an Upgrade request with 101 and its connection is ours: the exchange
   * ends here, the request goes on as a tunnel (upgrade-entry.ts finishes it when it closes).
   */
  handOff(): void {
    // 101 exists in HTTP/1.1 only (RFC 9113 §8.6), and upgrades never go over HTTP/2.
    this.stop(undefined, "1.1");
  }

  /** Marks the exchange over: its attempt's span ended, its timers stopped. False if it was. */
  private stop(errorCode: string | undefined, protocolVersion?: string): boolean {
    if (this.finished) return false;
    this.finished = true;
    this.request.exchange = undefined;
    this.endAttempt(errorCode, protocolVersion);
    this.stopQueueDeadline();
    this.layers.retry?.cancel();
    this.layers.relay.stop();
    return true;
  }

  /**
   * undici keeps a request with no free pooled connection in the pool's queue, with no deadline
   * (its timeouts start once the request is written). `timeouts.queue` bounds that wait; a
   * request waiting for a connection being opened is left to `timeouts.connect`.
   */
  private startQueueDeadline(): void {
    this.stopQueueDeadline();
    this.queued = true;
    this.route.queueDeadlines.add(this);
  }

  /** route.queueDeadlines: the wait is over and undici has not handed over a connection. */
  queueExpired(): void {
    this.queued = false;
    const upstream = this.route.config;
    if (this.finished || this.abortUpstream || !isQueued(this.dispatcher(), upstream.origin))
      return;
    this.fail({
      code: "upstream_busy",
      message: `no connection to upstream ${upstream.name} came free within timeouts.queue`,
      retryAfterSeconds: 1,
      cause: undefined,
    });
  }

  // undici's handler callbacks: checked here, then passed to the layers.

  onConnect(abort: (err?: Error) => void): void {
    this.stopQueueDeadline();
    // Finished before undici wrote anything (client gone, queue deadline): throwing makes undici
    // drop the request and keep the pooled connection (client-h1 writeH1 catches it and calls
    // errorRequest); `abort` would destroy that connection.
    if (this.finished) throw new Error("request abandoned before it was sent");
    this.abortUpstream = abort;
  }

  onHeaders(
    statusCode: number,
    rawHeaders: Buffer[],
    resume: () => void,
    statusText: string,
  ): boolean {
    if (this.finished) return true;
    if (statusCode >= 200) {
      this.headArrived = true;
      this.attemptStatus = statusCode;
    }
    return this.headFor(statusCode).onHeaders(
      statusCode,
      (rawHeaders ?? []) as RawHeaders,
      resume,
      statusText,
    );
  }

  onData(chunk: Buffer): boolean {
    if (this.finished) return true;
    return this.layers.head.onData(chunk);
  }

  onComplete(trailers: string[] | null): void {
    if (this.finished) return;
    this.layers.head.onComplete(trailers);
  }

  onError(err: Error): void {
    if (this.finished) return;
    this.headFor(undefined).onError(err);
  }

  /** The outermost layer for this answer (or error), the recovery layers built if it may need them. */
  private headFor(statusCode: number | undefined): AttemptHandler {
    const layers = this.layers;
    if (layers.recoveries !== undefined && mayNeedRecovery(statusCode)) {
      const built = layers.recoveries.buildRecoveries(this, layers.relay);
      layers.recoveries = undefined;
      layers.head = built.head;
      layers.retry = built.retry;
      layers.pacing = built.pacing;
    }
    return layers.head;
  }

  onUpgrade(statusCode: number, rawHeaders: Buffer[] | string[] | null, socket: Duplex): void {
    if (this.finished) {
      socket.destroy();
      return;
    }
    this.attemptStatus = statusCode;
    this.layers.head.onUpgrade(statusCode, (rawHeaders ?? []) as RawHeaders, socket);
  }
}

/**
 * True when the request waits behind busy connections: requests sit in the pool's queue for
 * `origin` (undici pool-base.js `[kDispatch]`), or, for a single-connection Client, behind the
 * one running on a connected socket. False while a connection is still being opened (left to
 * `timeouts.connect`). A dispatcher without stats (a ProxyAgent) counts as waiting.
 */
function isQueued(dispatcher: Dispatcher, origin: string): boolean {
  type Stats = { queued?: number; pending?: number; connected?: number | boolean };
  const stats = (dispatcher as { stats?: Record<string, Stats | undefined> }).stats?.[origin];
  if (stats === undefined) return true;
  if (stats.queued !== undefined) return stats.queued > 0;
  return Boolean(stats.connected) && (stats.pending ?? 0) > 0;
}
