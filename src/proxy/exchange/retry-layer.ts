/**
 * Retries inside an exchange: a failure before any response head, on a request a second copy
 * can't harm (RFC 9110 §9.2.2: an idempotent method, or an Idempotency-Key) with a body that can
 * be sent again — a connection refused or reset, and 502/503/504 when `retry.on` lists them — is
 * retried within `retry.attempts` and the upstream's retry budget, after a jittered backoff, in a
 * free turn or not at all. The first retry after a reset goes at once on a fresh connection: the
 * upstream closed a pooled keep-alive connection as we reused it, which says nothing about its
 * health. Without pacing (no policy), one immediate retry after a reset, as before issue 26.
 */
import type { RawHeaders } from "../../net/raw-headers.js";
import {
  isRetrySafe,
  type RetryReason,
  retryDelayMs,
  shouldRetry,
} from "../../pacing/retry-policy.js";
import { errorCodes, type MappedProxyError, mapUpstreamError } from "../proxy-errors.js";
import { HoldingLayer } from "./holding-layer.js";

export class RetryLayer extends HoldingLayer {
  /** Why the answer held now (a 502/503/504) would be retried. */
  private heldReason: RetryReason | undefined;
  /** Retries so far. */
  private retries = 0;
  /** isRetrySafe of the request, computed on the first failure. */
  private safeToRetry: boolean | undefined;
  /** The backoff before a retry. */
  private timer: NodeJS.Timeout | undefined;

  override onHeaders(
    statusCode: number,
    rawHeaders: RawHeaders,
    resume: () => void,
    statusText: string,
  ): boolean {
    // An answer that paused the pacer (Retry-After) is relayed, never retried past the pause.
    if (statusCode >= 502 && statusCode <= 504 && !this.exchange.paused) {
      const reason = String(statusCode) as RetryReason;
      // Held even when the first 5xx head of this attempt: nothing was relayed yet.
      if (this.mayRetry(reason, true)) {
        this.heldReason = reason;
        return this.hold(statusCode, rawHeaders, resume, statusText);
      }
    }
    return this.next.onHeaders(statusCode, rawHeaders, resume, statusText);
  }

  protected override decide(relay: () => void): void {
    // The budget is spent last, once the retry is sure to be wanted.
    const budget = this.exchange.route.pacing?.budget;
    if (budget?.tryAcquireRetry() ?? false) this.retry(this.heldReason!, relay);
    else relay();
  }

  override onError(err: Error): void {
    const { exchange } = this;
    const upstream = exchange.route.config;
    const mapped = mapUpstreamError(err, upstream.name, upstream.maxResponseHeaderSizeBytes);
    const reason = retryReasonOf(err, mapped);
    // The budget is spent last, once the retry is sure to be wanted.
    if (
      reason !== undefined &&
      this.mayRetry(reason, false) &&
      (exchange.route.pacing?.budget.tryAcquireRetry() ?? true)
    ) {
      exchange.endAttempt(mapped.code);
      this.retry(reason, () => this.next.onError(err));
      return;
    }
    super.onError(err);
  }

  /**
   * True when this failure may be retried as far as the request and the policy go: nothing
   * relayed yet, no other response head this attempt (`headHere`: the head being decided on is
   * this 5xx), a replayable body, a request a second copy can't harm, attempts left. The budget
   * is the caller's last check.
   */
  private mayRetry(reason: RetryReason, headHere: boolean): boolean {
    const { exchange } = this;
    if (!exchange.replayable || exchange.bytesOut > 0 || exchange.request.res.headersSent)
      return false;
    if (!headHere && exchange.headArrived) return false;
    const pacing = exchange.route.pacing;
    const allowed =
      pacing === undefined
        ? reason === "reset" && this.retries === 0
        : shouldRetry(pacing.retry, {
            attempt: this.retries + 1,
            reason,
            bytesRelayed: exchange.bytesOut,
          });
    if (!allowed) return false;
    this.safeToRetry ??= isRetrySafe(exchange.request.method, exchange.request.headers);
    return this.safeToRetry;
  }

  /**
   * Sends the request again: at once on a fresh connection for the first reset, else after the
   * policy's jittered backoff and only in a free turn (a retry never queues; it is one more
   * request the upstream counts). `giveUp` answers the client when it can't go.
   */
  private retry(reason: RetryReason, giveUp: () => void): void {
    const { exchange } = this;
    exchange.stopQueueDeadline();
    this.retries++;
    const pacing = exchange.route.pacing;
    pacing?.retried(reason);
    const fresh = reason === "reset";
    if (pacing === undefined || (fresh && this.retries === 1)) {
      exchange.resendNow(fresh);
      return;
    }
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        if (!exchange.finished) exchange.resend({ fresh, waitMs: 0 }, giveUp);
      },
      retryDelayMs(pacing.retry, this.retries),
    );
  }

  /** Stops a pending backoff (the exchange ended). */
  cancel(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
  }
}

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
