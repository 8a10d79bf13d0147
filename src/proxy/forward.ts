/**
 * One proxied exchange: dispatch to the upstream with undici's handler API and stream the
 * answer back with backpressure both ways. Owns the recoveries, each sending the request again
 * only after the pacer gave it a turn (issue 26: the upstream counts every copy):
 * - an upstream 401 on a replayable request: the 401 is held (headers + a bounded body), the
 *   token invalidated, a fresh one fetched and the request replayed exactly once; if no fresh
 *   token comes, or the replay is 401 again, the client gets the upstream's 401 unchanged;
 * - a failure before any response byte on a request a second copy can't harm (RFC 9110 §9.2.2:
 *   an idempotent method, or an Idempotency-Key) with a replayable body: a connection refused
 *   or reset, and 502/503/504 when `retry.on` lists them, is retried within `retry.attempts`
 *   and the upstream's retry budget, after a jittered backoff, in a free turn or not at all.
 *   The first retry after a reset goes at once on a fresh connection: the upstream closed a
 *   pooled keep-alive connection as we reused it, which says nothing about its health.
 * An upstream 429 or 503 with Retry-After pauses the upstream's pacer; the answer is relayed.
 * Redirects are passed through, never followed: following would carry the token elsewhere.
 *
 * The handler speaks undici's original callback API (onConnect/onHeaders/onData/onComplete/
 * onError), which the dispatcher core calls directly. The newer controller API is adapted onto
 * it by a wrapper that allocates a controller per request and parses the response headers and
 * trailers into objects we never read — about 1.5% of a small GET's CPU.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import type { UpstreamConfig } from "../config/types.js";
import { PROXY_ERROR_STATUS, type ProxyErrorCode } from "../errors.js";
import { firstFieldValue } from "../net/raw-headers.js";
import {
  type ClientSpan,
  NOOP_TRACING,
  type ServerSpan,
  writeTraceContext,
} from "../observability/tracing.js";
import type { AccessToken, TokenProvider } from "../token/types.js";
import type { Admission } from "./pacing/limiter.js";
import { parseRetryAfter } from "./pacing/pause.js";
import { isRetrySafe, type RetryReason, retryDelayMs, shouldRetry } from "./pacing/retry-policy.js";
import type { UpstreamPacing } from "./pacing/upstream-pacing.js";
import {
  errorCodes,
  type MappedProxyError,
  mapUpstreamError,
  sendProxyError,
} from "./proxy-errors.js";
import {
  clientGetsChunked,
  earlyHints,
  responseFraming,
  responseHasBody,
  trailerPairs,
  withoutField,
} from "./response-framing.js";
import { clientResponseHeaders } from "./response-headers.js";

/**
 * Largest 401 (or retryable 5xx) body held while deciding whether to send the request again; a
 * bigger one is passed through.
 */
const HELD_LIMIT_BYTES = 64 * 1024;

/** How an exchange ended, for the request log and metrics. */
export interface ExchangeOutcome {
  status: number;
  replayed: boolean;
  /** Response body bytes relayed to the client. */
  bytesOut: number;
  /** `client_too_slow`: the client read slower than `limits.minResponseRate` (connection cut). */
  errorCode: ProxyErrorCode | "client_closed" | "client_too_slow" | undefined;
  /** The original failure behind errorCode, for a debug log. */
  cause: unknown;
  /** Requests sent upstream: 1, more after retries and replays, 0 when none could be sent. */
  attempts?: number;
  /** ms the retries and replays waited for their turn from the pacer. */
  waitedMs?: number;
}

export interface ExchangeOptions {
  req: IncomingMessage;
  res: ServerResponse;
  upstream: UpstreamConfig;
  tokens: TokenProvider;
  dispatcher: Dispatcher;
  /**
   * Keeps no idle connections: the one retry after a reset goes through it, so it can't pick
   * another stale pooled socket (an upstream or load balancer that closed every idle connection
   * at once after a lull would otherwise fail the retry too).
   */
  freshDispatcher?: Dispatcher | undefined;
  method: string;
  /** Path and query as sent upstream, byte-exact. */
  path: string;
  headers: string[];
  authorizationIndex: number;
  /** Where the DPoP proof goes (`headers[dpopIndex]`), signed anew for every attempt; -1: none. */
  dpopIndex: number;
  /** The Authorization value for a token (validated; see inject-headers). */
  authorization: (token: AccessToken) => string;
  token: AccessToken;
  /** A Buffer (replayable), a stream (not), or null for no body. */
  body: Buffer | Readable | null;
  /** Add `Connection: close` to the client response (draining, or unread client body). */
  closeConnection: () => boolean;
  /** Slowest the client may read (bytes/s, 0: off) once its buffer is full; see waitForDrain. */
  minResponseRate: number;
  minDataRateGraceMs: number;
  /** The request's SERVER span: each attempt is a CLIENT span under it. Default: off. */
  span?: ServerSpan | undefined;
  /**
   * The upstream's pacing (issue 26): retries follow its policy and budget, resends wait for a
   * turn, a Retry-After pauses it. Undefined: one immediate retry after a reset, as before.
   */
  pacing?: UpstreamPacing | undefined;
  /** The pacing budget this request spends (the upstream's name, or the caller). */
  paceKey?: string | undefined;
  /** The `RateLimit` value of the request's admission; sent with `RateLimit-Policy`. */
  rateLimit?: string | undefined;
  onDone: (outcome: ExchangeOutcome) => void;
}

const NO_SPAN = NOOP_TRACING.startServerSpan({ headers: {} });

/** A 401 held for a replay, or a 502/503/504 held for a retry, until it is complete. */
interface HeldResponse {
  statusCode: number;
  rawHeaders: (Buffer | string)[];
  chunks: Buffer[];
  size: number;
  /** Set once the held response is complete. */
  trailers?: (Buffer | string)[] | null;
  /** A DPoP resource server asked for a nonce (RFC 9449 §9): retry with it, same token. */
  useNonce: boolean;
  /** Held for a retry on this status (`retry.on` lists it), not for a 401 replay. */
  retry: RetryReason | undefined;
}

/** Starts the exchange; `onDone` is called exactly once. Call `abortFromClient` on hang-up. */
export function startExchange(options: ExchangeOptions): Exchange {
  const exchange = new Exchange(options);
  exchange.dispatch();
  return exchange;
}

export class Exchange implements Dispatcher.DispatchHandler {
  private readonly o: ExchangeOptions;
  /** undici's abort for the current attempt (set in onConnect). */
  private abortUpstream: ((err?: Error) => void) | undefined;
  /** undici's resume for the current attempt (set in onHeaders); called on the client's drain. */
  private resumeUpstream: (() => void) | undefined;
  /** Set while the client's socket buffer is full and a drain listener is waiting. */
  private waitingForDrain = false;
  private token: AccessToken;
  private readonly replayable: boolean;
  private replayed = false;
  /** Requests sent upstream so far (every dispatch that got a proof and went). */
  private attempts = 0;
  /** Retries under `upstreams[].retry` so far. */
  private retries = 0;
  /** The next attempt goes through the fresh dispatcher (after a reset). */
  private useFresh = false;
  /** isRetrySafe of the request, computed on the first failure. */
  private safeToRetry: boolean | undefined;
  /** The backoff before a retry. */
  private retryTimer: NodeJS.Timeout | undefined;
  /** Ends a resend's wait for its turn when the client hangs up. */
  private turnWait: AbortController | undefined;
  /** ms resends waited for their turn. */
  private waitedMs = 0;
  /** The one retry a DPoP `use_dpop_nonce` 401 gets, before any token replay. */
  private nonceRetried = false;
  /** The upstream URL a DPoP proof names (`htu`; the query is dropped when signing). */
  private proofUrl: string | undefined;
  private finished = false;
  private clientGone = false;
  /** Set while a 401 (or a retryable 5xx) is held for a possible resend. */
  private held: HeldResponse | undefined;
  private responseStarted = false;
  private bytesOut = 0;
  /** Runs from dispatch until undici hands the request a connection (onConnect). */
  private queueTimer: NodeJS.Timeout | undefined;
  /** Set when the client must take its full buffer before this fires (minResponseRate). */
  private drainTimer: NodeJS.Timeout | undefined;
  /** The current attempt's CLIENT span, and the status the upstream answered it with. */
  private attempt: ClientSpan | undefined;
  private attemptStatus = 0;

  constructor(options: ExchangeOptions) {
    this.o = options;
    this.token = options.token;
    this.replayable = options.body === null || Buffer.isBuffer(options.body);
  }

  dispatch(): void {
    const { upstream, method, path, headers, body } = this.o;
    const dispatcher = this.useFresh
      ? (this.o.freshDispatcher ?? this.o.dispatcher)
      : this.o.dispatcher;
    this.abortUpstream = undefined;
    this.resumeUpstream = undefined;
    this.held = undefined;
    this.responseStarted = false;
    if (this.o.dpopIndex >= 0 && !this.signProof()) return;
    this.attemptStatus = 0;
    this.attempt = (this.o.span ?? NO_SPAN).startClientSpan(
      method,
      upstream.origin,
      path,
      upstream.name,
      this.attempts,
    );
    this.attempts++;
    // The upstream sees this attempt as the parent (a no-op when tracing is off).
    writeTraceContext(headers, this.attempt);
    this.startQueueTimer(dispatcher);
    try {
      dispatcher.dispatch(
        {
          origin: upstream.origin,
          path,
          method,
          headers,
          body,
          headersTimeout: upstream.timeouts.responseHeadersMs,
          bodyTimeout: upstream.timeouts.bodyIdleMs,
          // The retry's connection is closed afterwards, so the fresh dispatcher never pools.
          reset: this.useFresh,
        },
        this,
      );
    } catch (err) {
      this.fail(mapUpstreamError(err, upstream.name));
    }
  }

  /**
   * A fresh DPoP proof for this attempt (new `jti`; `ath` of the token it carries; the origin's
   * last nonce): a reset retry or a replay never resends a proof the upstream may have seen.
   */
  private signProof(): boolean {
    const { dpop } = this.token;
    const { headers, dpopIndex, upstream } = this.o;
    try {
      if (!dpop) throw new Error("a DPoP upstream got a token that is not bound to a DPoP key");
      this.proofUrl ??= `${upstream.origin}${this.o.path}`;
      headers[dpopIndex] = dpop.proofFor(this.o.method, this.proofUrl, this.token.value);
      return true;
    } catch (err) {
      this.fail({
        code: "internal_error",
        message: `no DPoP proof could be signed for upstream ${upstream.name}`,
        cause: err,
      });
      return false;
    }
  }

  /** The client went away: abort the upstream request and stop. */
  abortFromClient(): void {
    if (this.finished) return;
    this.clientGone = true;
    // done() first: the abort calls onError synchronously, which must see us finished.
    const status = this.responseStarted ? this.o.res.statusCode : 499;
    this.done({ status, errorCode: "client_closed", cause: undefined });
    this.abortUpstream?.(new Error("client closed the connection"));
    this.turnWait?.abort(new Error("client closed the connection"));
  }

  onConnect(abort: (err?: Error) => void): void {
    clearTimeout(this.queueTimer);
    // Finished before undici wrote anything (client gone, queue deadline): throwing makes undici
    // drop the request and keep the pooled connection (client-h1 writeH1 catches it and calls
    // errorRequest); `abort` would destroy that connection.
    if (this.finished) throw new Error("request abandoned before it was sent");
    this.abortUpstream = abort;
  }

  /**
   * undici keeps a request with no free pooled connection in the pool's queue, with no deadline
   * (its timeouts start once the request is written). `timeouts.queue` bounds that wait; a
   * request waiting for a connection being opened is left to `timeouts.connect`.
   */
  private startQueueTimer(dispatcher: Dispatcher): void {
    clearTimeout(this.queueTimer);
    const { upstream } = this.o;
    this.queueTimer = setTimeout(() => {
      if (this.finished || this.abortUpstream || !isQueued(dispatcher, upstream.origin)) return;
      this.fail({
        code: "upstream_busy",
        message: `no connection to upstream ${upstream.name} came free within timeouts.queue`,
        retryAfterSeconds: 1,
        cause: undefined,
      });
    }, upstream.timeouts.queueMs);
  }

  /** Returns false to pause the upstream until `resume` (undici's backpressure contract). */
  onHeaders(
    statusCode: number,
    rawHeaders: Buffer[],
    resume: () => void,
    _statusText: string,
  ): boolean {
    this.resumeUpstream = resume;
    const raw = (rawHeaders ?? []) as (Buffer | string)[];
    // Interim responses: undici reports the final response after them (issue 15 item 7).
    if (statusCode < 200) {
      if (statusCode === 103 && !this.finished) this.relayEarlyHints(raw);
      return true;
    }
    this.attemptStatus = statusCode;
    if (this.finished) return true;
    // Every answer may carry the origin's next DPoP-Nonce (RFC 9449 §8.2): kept for later proofs.
    const useNonce =
      this.token.dpop !== undefined &&
      this.proofUrl !== undefined &&
      this.token.dpop.noteResponse(this.proofUrl, statusCode, raw) &&
      !this.nonceRetried;
    // "Slow down" (RFC 6585 §4, RFC 9110 §15.6.4): nothing more goes before Retry-After.
    const paused = (statusCode === 429 || statusCode === 503) && this.noteSlowDown(statusCode, raw);
    if (statusCode === 401 && this.replayable && (!this.replayed || useNonce)) {
      this.held = { statusCode, rawHeaders: raw, chunks: [], size: 0, useNonce, retry: undefined };
      return true;
    }
    if (statusCode >= 502 && statusCode <= 504 && !paused) {
      const reason = String(statusCode) as RetryReason;
      if (this.mayRetry(reason)) {
        this.held = {
          statusCode,
          rawHeaders: raw,
          chunks: [],
          size: 0,
          useNonce: false,
          retry: reason,
        };
        return true;
      }
    }
    this.writeHead(statusCode, raw);
    return true;
  }

  /**
   * A 429 or 503 with a Retry-After (delta-seconds or HTTP-date, RFC 9110 §10.2.3) pauses the
   * upstream's pacer until then, for at most `rateLimit.maxPause`. True when it did.
   */
  private noteSlowDown(statusCode: 429 | 503, raw: readonly (Buffer | string)[]): boolean {
    const pacing = this.o.pacing;
    if (pacing === undefined) return false;
    const retryAfter = firstFieldValue(raw, "retry-after");
    const waitMs = parseRetryAfter(retryAfter, Date.now(), pacing.maxPauseMs);
    if (waitMs === undefined || waitMs <= 0) return false;
    pacing.slowDown(waitMs, statusCode);
    return true;
  }

  /** Returns false to pause the upstream until the client drains. */
  onData(chunk: Buffer): boolean {
    if (this.finished) return true;
    const held = this.held;
    if (held) {
      held.chunks.push(chunk);
      held.size += chunk.length;
      if (held.size > HELD_LIMIT_BYTES) return this.releaseHeld(false);
      return true;
    }
    this.bytesOut += chunk.length;
    if (this.o.res.write(chunk)) return true;
    this.waitForDrain();
    return false;
  }

  /** The client's buffer is full: resume the upstream once it drains (one listener at a time). */
  private waitForDrain(): void {
    if (this.waitingForDrain) return;
    this.waitingForDrain = true;
    const { res, minResponseRate, minDataRateGraceMs } = this.o;
    if (minResponseRate > 0) {
      // Kestrel's MinResponseDataRate: the buffered bytes must go within their time at the
      // minimum rate (at least the grace). undici's body timeout doesn't run while paused, so
      // without this a client that stops reading holds the upstream connection forever.
      const deadlineMs = Math.max(
        minDataRateGraceMs,
        (res.writableLength / minResponseRate) * 1000,
      );
      this.drainTimer = setTimeout(() => this.clientTooSlow(), deadlineMs);
    }
    res.once("drain", () => {
      clearTimeout(this.drainTimer);
      this.waitingForDrain = false;
      this.resumeUpstream?.();
    });
  }

  /** The client reads slower than limits.minResponseRate: cut it off and free the upstream. */
  private clientTooSlow(): void {
    if (this.finished) return;
    this.clientGone = true;
    this.done({
      status: this.o.res.statusCode,
      errorCode: "client_too_slow",
      cause: undefined,
    });
    this.abortUpstream?.(new Error("client reads too slowly"));
    this.o.res.destroy();
  }

  onComplete(trailers: string[] | null): void {
    if (this.finished) return;
    const held = this.held;
    if (held) {
      held.trailers = trailers;
      this.endAttempt(undefined);
      const relay = () => this.relayHeld(held);
      if (held.retry !== undefined) {
        // The budget is spent last, once the retry is sure to be wanted.
        if (this.o.pacing?.budget.tryAcquireRetry() ?? false) this.retry(held.retry, relay);
        else relay();
        return;
      }
      if (held.useNonce) {
        // The resource server wants a nonce it has now sent: once more, same token, new proof.
        this.nonceRetried = true;
        this.sendAgain(undefined, relay);
        return;
      }
      void this.replayAfter401(held);
      return;
    }
    this.relayTrailers(trailers);
    this.o.res.end();
    this.done({ status: this.o.res.statusCode, errorCode: undefined, cause: undefined });
  }

  onError(err: Error): void {
    if (this.finished) return;
    if (this.bodilessLengthMismatch(err)) {
      this.o.res.end();
      this.done({ status: this.o.res.statusCode, errorCode: undefined, cause: undefined });
      return;
    }
    const { upstream } = this.o;
    const mapped = mapUpstreamError(err, upstream.name, upstream.maxResponseHeaderSizeBytes);
    const reason = retryReasonOf(err, mapped);
    // The budget is spent last, once the retry is sure to be wanted.
    if (
      reason !== undefined &&
      this.mayRetry(reason) &&
      (this.o.pacing?.budget.tryAcquireRetry() ?? true)
    ) {
      this.endAttempt(mapped.code);
      this.retry(reason, () => this.fail(mapped));
      return;
    }
    this.fail(mapped);
  }

  /**
   * undici 7 raises a length mismatch for a 304 or 204 that carries Content-Length (RFC 9110
   * §8.6 lets a 304 announce the length of the representation it stands for): the response
   * is complete, so the client's is ended normally.
   */
  private bodilessLengthMismatch(err: Error): boolean {
    const status = this.o.res.statusCode;
    return (
      this.responseStarted &&
      (status === 304 || status === 204) &&
      (err as { code?: unknown }).code === "UND_ERR_RES_CONTENT_LENGTH_MISMATCH"
    );
  }

  /**
   * True when this failure may be retried as far as the request and the policy go: nothing
   * relayed yet, a replayable body, a request a second copy can't harm, attempts left. The
   * budget is the caller's last check.
   */
  private mayRetry(reason: RetryReason): boolean {
    if (this.responseStarted || this.held !== undefined || !this.replayable) return false;
    const pacing = this.o.pacing;
    const allowed =
      pacing === undefined
        ? reason === "reset" && this.retries === 0
        : shouldRetry(pacing.retry, {
            attempt: this.retries + 1,
            reason,
            bytesRelayed: this.bytesOut,
          });
    if (!allowed) return false;
    this.safeToRetry ??= isRetrySafe(this.o.method, this.o.headers);
    return this.safeToRetry;
  }

  /**
   * Sends the request again after a failure: at once on a fresh connection for the first reset,
   * else after the policy's jittered backoff and only in a free turn (a retry never queues; it
   * is one more request the upstream counts). `giveUp` answers the client when it can't go.
   */
  private retry(reason: RetryReason, giveUp: () => void): void {
    // A refused connection never reached onConnect: its queue deadline must not fire meanwhile.
    clearTimeout(this.queueTimer);
    this.retries++;
    const pacing = this.o.pacing;
    pacing?.retried(reason);
    if (reason === "reset") this.useFresh = true;
    if (pacing === undefined || (reason === "reset" && this.retries === 1)) {
      this.dispatch();
      return;
    }
    this.retryTimer = setTimeout(
      () => {
        this.retryTimer = undefined;
        if (!this.finished) this.sendAgain(0, giveUp);
      },
      retryDelayMs(pacing.retry, this.retries),
    );
  }

  /**
   * Dispatches once the pacer gives the request another turn: at once when one is free, after a
   * wait of up to `waitMs` (undefined: the pacer's `wait`), or not at all — then `refused` runs.
   */
  private sendAgain(waitMs: number | undefined, refused: () => void): void {
    const pacing = this.o.pacing;
    if (pacing === undefined) {
      this.dispatch();
      return;
    }
    const turn = pacing.pacer.acquire(
      this.o.paceKey ?? pacing.upstream,
      () => this.turnWaitSignal(),
      waitMs,
    );
    if (!(turn instanceof Promise)) {
      this.afterTurn(turn, refused);
      return;
    }
    turn.then(
      (admission) => {
        if (!this.finished) this.afterTurn(admission, refused);
      },
      () => {
        // The client left (finished already), or the pacer closed: answer as if no turn came.
        if (!this.finished) refused();
      },
    );
  }

  /** Made only when a resend has to wait (for its turn, or a new token); a hang-up aborts it. */
  private turnWaitSignal(): AbortSignal {
    this.turnWait ??= new AbortController();
    return this.turnWait.signal;
  }

  private afterTurn(admission: Admission, refused: () => void): void {
    if (!admission.ok) {
      refused();
      return;
    }
    this.waitedMs += admission.waitedMs;
    this.dispatch();
  }

  /** Relays a held response as the client's answer (no resend will come). */
  private relayHeld(held: HeldResponse): void {
    if (this.finished) return;
    this.held = held;
    this.releaseHeld(true);
  }

  private writeHead(statusCode: number, raw: readonly (Buffer | string)[]): boolean {
    const { res, req, method } = this.o;
    try {
      // Issue 15 items 2 and 6: see response-framing.ts.
      let headers = clientResponseHeaders(raw, this.o.closeConnection());
      // draft-ietf-httpapi-ratelimit-headers: what the client's budget looks like after this one.
      const policy = this.o.pacing?.policy;
      if (policy !== undefined && this.o.rateLimit !== undefined) {
        headers.push("ratelimit-policy", policy, "ratelimit", this.o.rateLimit);
      }
      const framing = responseFraming(headers);
      const hasBody = responseHasBody(method, statusCode);
      if (framing.announcesTrailers && !(hasBody && clientGetsChunked(req, framing))) {
        headers = withoutField(headers, "trailer");
      }
      res.writeHead(statusCode, headers);
      if (hasBody && (!framing.hasContentLength || framing.eventStream)) res.flushHeaders();
      this.responseStarted = true;
      return true;
    } catch (err) {
      // A header Node refuses to write (invalid characters): treat as a bad upstream answer.
      this.abortUpstream?.(err as Error);
      this.fail({
        code: "upstream_error",
        message: `upstream ${this.o.upstream.name} sent a response header that can't be relayed`,
        cause: err,
      });
      return false;
    }
  }

  /**
   * Sends the held 401 (complete, or its start when it outgrew the hold limit). Returns false
   * when the upstream must pause until the client drains.
   */
  private releaseHeld(complete: boolean): boolean {
    const held = this.held!;
    this.held = undefined;
    if (!this.writeHead(held.statusCode, held.rawHeaders)) return true;
    let ok = true;
    for (const chunk of held.chunks) {
      this.bytesOut += chunk.length;
      ok = this.o.res.write(chunk) && ok;
    }
    if (complete) {
      this.relayTrailers(held.trailers ?? null);
      this.o.res.end();
      this.done({ status: held.statusCode, errorCode: undefined, cause: undefined });
      return true;
    }
    if (ok) return true;
    this.waitForDrain();
    return false;
  }

  /** 103 Early Hints to HTTP/1.1 clients only (RFC 9110 §15.2: never 1xx to HTTP/1.0). */
  private relayEarlyHints(raw: readonly (Buffer | string)[]): void {
    const { req, res } = this.o;
    if (res.headersSent || req.httpVersionMajor !== 1 || req.httpVersionMinor < 1) return;
    const hints = earlyHints(raw);
    if (!hints) return;
    try {
      res.writeEarlyHints(hints);
    } catch {
      // A Link value Node refuses: the hints are optional, the final response is not.
    }
  }

  /** Upstream trailers, when the client's response is chunked (see response-framing.ts). */
  private relayTrailers(trailers: readonly (Buffer | string)[] | null): void {
    const { res } = this.o;
    if (!trailers || trailers.length === 0 || !res.chunkedEncoding) return;
    try {
      res.addTrailers(trailerPairs(trailers));
    } catch {
      // A field Node refuses: the body is complete without it.
    }
  }

  private async replayAfter401(held: HeldResponse): Promise<void> {
    let fresh: AccessToken | undefined;
    try {
      fresh = await this.freshToken();
    } catch {
      fresh = undefined;
    }
    if (this.finished) return;
    // No new token (endpoint down, or this one too young to drop): the 401 stands.
    if (!fresh || fresh.value === this.token.value) {
      this.relayHeld(held);
      return;
    }
    this.replayed = true;
    this.token = fresh;
    try {
      this.o.headers[this.o.authorizationIndex] = this.o.authorization(fresh);
    } catch (err) {
      this.fail(mapUpstreamError(err, this.o.upstream.name));
      return;
    }
    // The replay is one more request the upstream counts: it waits for its turn like any other.
    this.sendAgain(undefined, () => this.relayHeld(held));
  }

  /**
   * A token other than the rejected one: one another request got already, or the one the
   * invalidation fetches. That wait is a span of the request's trace as the first wait is
   * (request-dispatch.ts), and the fetch its child: after a 401 it is often where the time
   * went. A hang-up ends it. The rejected token back means the 401 stands (too young to drop).
   */
  private async freshToken(): Promise<AccessToken> {
    const { upstream, tokens } = this.o;
    const current = tokens.peekToken();
    if (current !== undefined && current.value !== this.token.value) return current;
    const wait = (this.o.span ?? NO_SPAN).startTokenSpan(upstream.name);
    const signal = this.turnWaitSignal();
    try {
      tokens.invalidate(this.token, wait);
      const token = tokens.peekToken() ?? (await tokens.getToken(signal, wait));
      wait.end();
      return token;
    } catch (err) {
      wait.end(signal.aborted ? "client_closed" : mapUpstreamError(err, upstream.name).code);
      throw err;
    }
  }

  private fail(mapped: MappedProxyError): void {
    if (this.finished) return;
    const { res, upstream } = this.o;
    if (this.held && !res.headersSent) this.held = undefined;
    if (!this.clientGone) {
      sendProxyError(res, mapped.code, mapped.message, upstream.name, {
        retryAfterSeconds: mapped.retryAfterSeconds,
        close: this.o.closeConnection(),
      });
    }
    this.done({
      status: this.responseStarted ? res.statusCode : PROXY_ERROR_STATUS[mapped.code],
      errorCode: mapped.code,
      cause: mapped.cause,
    });
  }

  /**
   * The upstream answered an Upgrade request with 101 and undici handed its connection over
   * (upgrade-dispatcher.ts): the attempt ends here, and the exchange with it. `onDone` is not
   * called: the upgrade handler owns the connection now and finishes the request itself, with
   * the attempts and resend waits returned here.
   */
  switchedProtocols(statusCode: number): Required<Pick<ExchangeOutcome, "attempts" | "waitedMs">> {
    this.attemptStatus = statusCode;
    // 101 exists in HTTP/1.1 only (RFC 9113 §8.6), and upgrades never go over HTTP/2.
    this.finish(undefined, "1.1");
    return { attempts: this.attempts, waitedMs: this.waitedMs };
  }

  /** Ends the current attempt's span (an attempt retried or replayed ends before the next). */
  private endAttempt(
    errorCode: string | undefined,
    protocolVersion = this.o.upstream.http2 ? undefined : "1.1",
  ): void {
    const attempt = this.attempt;
    if (!attempt) return;
    this.attempt = undefined;
    attempt.end(this.attemptStatus, errorCode, protocolVersion);
  }

  /** Marks the exchange finished: its attempt's span ended, its timers stopped. False if it was. */
  private finish(errorCode: string | undefined, protocolVersion?: string): boolean {
    if (this.finished) return false;
    this.finished = true;
    this.endAttempt(errorCode, protocolVersion);
    clearTimeout(this.queueTimer);
    clearTimeout(this.drainTimer);
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    return true;
  }

  private done(outcome: Omit<ExchangeOutcome, "replayed" | "bytesOut">): void {
    if (!this.finish(outcome.errorCode)) return;
    // A literal of one fixed shape: spreading `outcome` here cost ~4% of a small GET's CPU.
    this.o.onDone({
      status: outcome.status,
      replayed: this.replayed,
      bytesOut: this.bytesOut,
      errorCode: outcome.errorCode,
      cause: outcome.cause,
      attempts: this.attempts,
      waitedMs: this.waitedMs,
    });
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

/** The first value of field `lowerName` in undici's raw header list. */
/**
 * The retry reason of a failed attempt: "reset" for a connection closed before the answer,
 * "connect" for one refused or not opened in time. TLS failures and response timeouts are not
 * retried: the first won't change, the second may have been processed.
 */
function retryReasonOf(err: unknown, mapped: MappedProxyError): RetryReason | undefined {
  if (mapped.code === "upstream_reset") return "reset";
  if (mapped.code === "upstream_unreachable") return "connect";
  if (mapped.code !== "upstream_timeout") return undefined;
  return errorCodes(err).includes("UND_ERR_CONNECT_TIMEOUT") ? "connect" : undefined;
}
