/**
 * The pacing gate as the request walk passes it (issue 26), once per request, after the token
 * (and body) are in hand and right before the exchange: a free turn goes on at once
 * (synchronously), a request over the limit waits for its turn within `rateLimit.wait` (or an
 * upstream's pause), and one whose turn would come later is refused 429 with Retry-After and
 * the RateLimit fields. Plain requests and Upgrade handshakes pass this one gate (the proxy's
 * pacing stage, proxy/pipeline/pacing-stage.ts): a handshake is a request the upstream counts
 * like any other.
 *
 * A request the pacer must hold takes a place in the waiting room first (base/waiting-room.ts,
 * issue 30 item 3) and leaves its load (`maxInFlight` / `maxUpgrades`) while it waits; with no
 * place it is answered 429 `rate_limited` at once. When its turn comes it gives the place back
 * and re-enters its load before the exchange starts.
 *
 * The gate decides; the request answers. What it needs of a request is {@link PacedRequest}, so
 * the fast path stays one synchronous call with one small object made per request.
 */
import { addressLabel } from "../base/peer-address.js";
import type { WaitingBound, WaitingLimits, WaitingRoom } from "../base/waiting-room.js";
import type { ProxyErrorCode } from "../errors.js";
import { type Admission, PacerClosedError } from "./limiter.js";
import { rateLimitValue } from "./ratelimit-headers.js";
import type { GateRefusalReason, UpstreamPacing } from "./upstream-pacing.js";

/** A request at the gate, as the gate sees it. */
export interface PacedRequest {
  /** True once the request was answered or its client hung up: the gate leaves it alone. */
  readonly finished: boolean;
  /** The caller an `allow` rule identified; undefined: its peer address counts as the caller. */
  readonly caller: string | undefined;
  /** Where the request comes from. */
  readonly peer: Peer;
  /** Ends the wait when the client hangs up; asked for only when the request has to wait. */
  waitSignal(): AbortSignal;
  /** It starts waiting: it leaves the load it counts in (`maxInFlight`, or `maxUpgrades`). */
  leaveLoad(): void;
  /**
   * Its turn came after a wait: it counts in its load again. False when it may not — then it
   * has answered already (an upgrade finding `maxUpgrades` full).
   */
  resumeLoad(): boolean;
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

/** Where requests wait (the process's room) and the bounds in force (the current `limits`). */
export interface WaitingPlaces {
  room: WaitingRoom;
  limits: WaitingLimits;
}

/** One request's pass through the gate: its place in the waiting room, if it took one. */
class GatePass {
  /** Holds a place in the room (and is out of its load). */
  parked = false;
  /** The bound that refused it a place, if one did. */
  refusedBy: WaitingBound | undefined = undefined;
  private caller = "";

  constructor(
    private readonly request: PacedRequest,
    readonly waiting: WaitingPlaces,
  ) {}

  // The signal is made only when the request has to wait: a hang-up then ends the wait.
  readonly signal = (): AbortSignal => this.request.waitSignal();

  readonly park = (): boolean => {
    if (this.parked) return true;
    const { request } = this;
    // As `rateLimit.by: caller` counts: the identity an allow rule established, else the peer.
    const caller = request.caller ?? addressLabel(request.peer.remoteAddress ?? "");
    const bound = this.waiting.room.enter(caller, this.waiting.limits);
    if (bound !== undefined) {
      this.refusedBy = bound;
      return false;
    }
    this.parked = true;
    this.caller = caller;
    request.leaveLoad();
    return true;
  };

  /** The wait is over, whatever its end: the place goes back. True when it had one. */
  unpark(): boolean {
    if (!this.parked) return false;
    this.parked = false;
    this.waiting.room.leave(this.caller);
    return true;
  }
}

/** Asks `pacing` for a turn on budget `key`; `request` proceeds or is refused exactly once. */
export function passGate(
  request: PacedRequest,
  pacing: UpstreamPacing,
  key: string,
  waiting: WaitingPlaces,
): void {
  const pass = new GatePass(request, waiting);
  const admission = pacing.pacer.acquire(key, pass.signal, undefined, pass.park);
  if (admission instanceof Promise) {
    void waitForTurn(request, pacing, key, admission, performance.now(), pass);
    return;
  }
  decide(request, pacing, key, admission, 0, pass);
}

async function waitForTurn(
  request: PacedRequest,
  pacing: UpstreamPacing,
  key: string,
  turn: Promise<Admission>,
  waitStartMs: number,
  pass: GatePass,
): Promise<void> {
  let admission: Admission;
  try {
    admission = await turn;
  } catch (err) {
    pass.unpark();
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
  const parked = pass.unpark();
  if (request.finished) return;
  const waitedMs = performance.now() - waitStartMs;
  try {
    // Back in its load before the exchange; a refusal answers without it (nothing to count).
    if (parked && admission.ok && !request.resumeLoad()) return;
    request.afterWait();
    // A refusal after waiting (a pause that grew, a turn that moved) waited all the same.
    decide(request, pacing, key, admission, waitedMs, pass);
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
  pass: GatePass,
): void {
  if (!admission.ok) {
    const reason: GateRefusalReason = pass.refusedBy ?? admission.code;
    pacing.refused(reason);
    const headers =
      pacing.policy === undefined
        ? undefined
        : { "ratelimit-policy": pacing.policy, ratelimit: rateLimitValue(admission)! };
    const message = refusalMessage(reason, pacing.upstream, pass.waiting.limits);
    request.refuse(admission.code, message, {
      retryAfterSeconds: admission.retryAfterSeconds,
      headers,
      waitedMs,
    });
    return;
  }
  request.proceed(pacing, key, admitted(pacing, admission), admission.waitedMs);
}

/**
 * Counts an admission for `pacing` and returns the `RateLimit` value to answer with (undefined
 * when nothing is advertised). pacing-stage.ts calls it for a turn free at once
 * (`pacer.admitNow`), which needs no pass through the gate.
 */
export function admitted(
  pacing: UpstreamPacing,
  admission: Extract<Admission, { ok: true }>,
): string | undefined {
  pacing.admitted(admission);
  return pacing.policy === undefined ? undefined : rateLimitValue(admission);
}

function refusalMessage(
  reason: GateRefusalReason,
  upstream: string,
  limits: WaitingLimits,
): string {
  switch (reason) {
    case "rate_limited":
      return `upstream ${upstream} is rate limited (upstreams[].rateLimit): no turn for this request within rateLimit.wait`;
    case "upstream_rate_limited":
      return `upstream ${upstream} asked to slow down (Retry-After) for longer than this request may wait`;
    case "max_waiting":
      return `upstream ${upstream} has no free turn, and limits.maxWaiting (${limits.maxWaiting}) requests wait already`;
    case "max_waiting_per_caller":
      return `upstream ${upstream} has no free turn, and this caller has limits.maxWaitingPerCaller (${limits.maxWaitingPerCaller}) requests waiting already`;
  }
}
