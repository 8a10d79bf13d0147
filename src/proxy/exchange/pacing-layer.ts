/**
 * The upstream's pacing inside an exchange (every upstream the app serves has pacing; the layer
 * is built when an attempt first meets a 401, 429, 502–504 or an error, or up front for DPoP —
 * exchange-stage.ts): an answer saying "slow down" — 429 or 503 with Retry-After (RFC 6585 §4,
 * RFC 9110 §10.2.3, delta-seconds or HTTP-date) — pauses the upstream's pacer until then (the
 * answer itself is relayed), and every resend (a retry, a 401 replay, a DPoP nonce retry) waits
 * for a turn like a first attempt does at the pacing stage: the upstream counts every copy.
 */
import { firstFieldValue, type RawHeaders } from "../../net/raw-headers.js";
import type { Admission } from "../../pacing/limiter.js";
import { pauseFromRetryAfter } from "../../pacing/pause.js";
import type { UpstreamPacing } from "../../pacing/upstream-pacing.js";
import type { Exchange } from "./exchange.js";
import { type AttemptHandler, ExchangeLayer } from "./layer.js";

export class PacingLayer extends ExchangeLayer {
  constructor(
    next: AttemptHandler,
    readonly pacing: UpstreamPacing,
    private readonly exchange: Exchange,
  ) {
    super(next);
  }

  override onHeaders(
    statusCode: number,
    rawHeaders: RawHeaders,
    resume: () => void,
    statusText: string,
  ): boolean {
    if (statusCode === 429 || statusCode === 503) this.noteSlowDown(statusCode, rawHeaders);
    return this.next.onHeaders(statusCode, rawHeaders, resume, statusText);
  }

  /**
   * Pauses the pacer until the answer's Retry-After, for at most `rateLimit.maxPause`; the
   * exchange knows (no retry then).
   */
  private noteSlowDown(statusCode: 429 | 503, raw: RawHeaders): void {
    const retryAfter = firstFieldValue(raw, "retry-after");
    const waitMs = pauseFromRetryAfter(retryAfter, Date.now(), this.pacing.maxPauseMs);
    if (waitMs === undefined || waitMs <= 0) return;
    this.pacing.slowDown(waitMs, statusCode);
    this.exchange.paused = true;
  }

  /**
   * Sends the exchange's next attempt once the pacer gives it a turn: at once when one is free,
   * after a wait of up to `waitMs` (undefined: the pacer's `wait`), or not at all — then
   * `noTurn` runs.
   */
  takeTurn(exchange: Exchange, waitMs: number | undefined, noTurn: () => void): void {
    const { request } = exchange;
    const turn = this.pacing.pacer.acquire(
      request.paceKey || this.pacing.upstream,
      () => exchange.resendSignal(),
      waitMs,
    );
    if (!(turn instanceof Promise)) {
      this.afterTurn(exchange, turn, noTurn);
      return;
    }
    turn.then(
      (admission) => {
        if (!exchange.finished) this.afterTurn(exchange, admission, noTurn);
      },
      () => {
        // The client left (finished already), or the pacer closed: answer as if no turn came.
        if (!exchange.finished) noTurn();
      },
    );
  }

  private afterTurn(exchange: Exchange, admission: Admission, noTurn: () => void): void {
    if (!admission.ok) {
      noTurn();
      return;
    }
    exchange.request.waitMs += admission.waitedMs;
    exchange.attempt();
  }
}
