/**
 * The pacing gate as the request walk passes it (issue 26), once per request, after the token
 * (and body) are in hand and right before the exchange: a free turn goes on at once
 * (synchronously), a request over the limit waits for its turn within `rateLimit.wait` (or an
 * upstream's pause), and one whose turn would come later is refused 429 with Retry-After and
 * the RateLimit fields. Plain requests (request-dispatch.ts) and Upgrade handshakes (upgrade.ts)
 * pass this one gate: a handshake is a request the upstream counts like any other.
 *
 * The gate decides; the request answers. What it needs of a request is {@link PacedRequest}, so
 * the fast path stays one synchronous call with no closure made per request.
 */
import { addressLabel } from "../../callers/types.js";
import type { ProxyErrorCode } from "../../errors.js";
import { type Admission, PacerClosedError } from "./limiter.js";
import { rateLimitValue } from "./ratelimit-headers.js";
import type { UpstreamPacing } from "./upstream-pacing.js";

/** A request at the gate, as the gate sees it. */
export interface PacedRequest {
  /** True once the request was answered or its client hung up: the gate leaves it alone. */
  readonly finished: boolean;
  /** Ends the wait when the client hangs up; asked for only when the request has to wait. */
  waitSignal(): AbortSignal;
  /** The wait is over (turn or not): a long one may have outlived the token in hand. */
  afterWait(): void;
  /**
   * Through the gate: start the exchange, spending budget `key` (its resends spend it too).
   * `rateLimit` is the `RateLimit` value to answer with; undefined when nothing is advertised.
   */
  proceed(
    pacing: UpstreamPacing,
    key: string,
    rateLimit: string | undefined,
    waitedMs: number,
  ): void;
  /** No turn: answer with the proxy's error contract. */
  refuse(code: ProxyErrorCode, message: string, refusal: GateRefusal): void;
}

export interface GateRefusal {
  retryAfterSeconds?: number | undefined;
  /** `RateLimit-Policy` and `RateLimit` when the upstream has a `rateLimit`. */
  headers?: Record<string, string> | undefined;
  cause?: unknown;
  /** ms the request waited before it was refused (0: refused at once). */
  waitedMs: number;
}

/** Where a request comes from, read only for `by: caller` without an identified caller. */
interface Peer {
  readonly remoteAddress?: string | undefined;
}

/**
 * The budget a request spends: the upstream's, or its caller's (`rateLimit.by: caller`): the
 * caller an `allow` list identified, else the TCP peer (the start log says so).
 */
export function budgetKey(pacing: UpstreamPacing, caller: string | undefined, peer: Peer): string {
  if (!pacing.byCaller) return pacing.upstream;
  return caller ?? addressLabel(peer.remoteAddress ?? "");
}

/** Asks `pacing` for a turn on budget `key`; `request` proceeds or is refused exactly once. */
export function passGate(request: PacedRequest, pacing: UpstreamPacing, key: string): void {
  // The signal is made only when the request has to wait: a hang-up then ends the wait.
  const admission = pacing.pacer.acquire(key, () => request.waitSignal());
  if (admission instanceof Promise) {
    void waitForTurn(request, pacing, key, admission, performance.now());
    return;
  }
  decide(request, pacing, key, admission, 0);
}

async function waitForTurn(
  request: PacedRequest,
  pacing: UpstreamPacing,
  key: string,
  turn: Promise<Admission>,
  waitStartMs: number,
): Promise<void> {
  let admission: Admission;
  try {
    admission = await turn;
  } catch (err) {
    // The client hung up (the request is finished already), or the pacer closed under it.
    if (request.finished) return;
    const waitedMs = performance.now() - waitStartMs;
    if (err instanceof PacerClosedError) {
      // A reload retired this upstream's pacer past shutdown.timeout, or the proxy is stopping.
      const message = "the proxy stopped pacing this upstream while the request waited";
      request.refuse("shutting_down", message, { retryAfterSeconds: 1, cause: err, waitedMs });
    } else {
      request.refuse("internal_error", "internal error", { cause: err, waitedMs });
    }
    return;
  }
  if (request.finished) return;
  const waitedMs = performance.now() - waitStartMs;
  try {
    request.afterWait();
    // A refusal after waiting (a pause that grew, a turn that moved) waited all the same.
    decide(request, pacing, key, admission, waitedMs);
  } catch (err) {
    // A bug past the wait must cost this request, never the process (no unhandled rejection).
    if (request.finished) return;
    request.refuse("internal_error", "internal error", { cause: err, waitedMs });
  }
}

function decide(
  request: PacedRequest,
  pacing: UpstreamPacing,
  key: string,
  admission: Admission,
  waitedMs: number,
): void {
  if (!admission.ok) {
    pacing.refused(admission.code);
    const headers =
      pacing.policy === undefined
        ? undefined
        : { "ratelimit-policy": pacing.policy, ratelimit: rateLimitValue(admission)! };
    request.refuse(admission.code, refusalMessage(admission.code, pacing.upstream), {
      retryAfterSeconds: admission.retryAfterSeconds,
      headers,
      waitedMs,
    });
    return;
  }
  pacing.admitted(admission);
  const value = pacing.policy === undefined ? undefined : rateLimitValue(admission);
  request.proceed(pacing, key, value, admission.waitedMs);
}

function refusalMessage(code: "rate_limited" | "upstream_rate_limited", upstream: string): string {
  return code === "rate_limited"
    ? `upstream ${upstream} is rate limited (upstreams[].rateLimit): no turn for this request within rateLimit.wait`
    : `upstream ${upstream} asked to slow down (Retry-After) for longer than this request may wait`;
}
