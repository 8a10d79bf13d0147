/**
 * Even pacing for `upstreams[].rateLimit` (issue 26), as functions of a state and a time.
 *
 * Upstreams count their limit over *any* rolling window, so the pacer must never let more than
 * `requests` go within any `per`. Two rules together give that with even spacing:
 * - GCRA, the Generic Cell Rate Algorithm (ITU-T I.371; a leaky bucket kept as one number, the
 *   theoretical arrival time TAT): a request may go once `now ≥ TAT − τ`, and then
 *   `TAT = max(TAT, now) + T`. T is the emission interval (`per / requests`), τ = burst·T the
 *   burst tolerance: with burst 0 requests go strictly T apart, with burst b up to b + 1 go at
 *   once after a lull and the rest T apart.
 * - A hard cap over a sliding window: the `requests`-th most recent departure must be at least a
 *   window old. GCRA alone lets `requests + burst` through in the first window after a lull; the
 *   cap takes the burst out of that window's share, so a burst never adds to the limit. With
 *   burst 0 the spacing alone keeps the cap and no log is kept.
 *
 * The window is `per` plus a small margin (2% of `per`, 10 ms to 1 s): departures and arrivals
 * differ by network and event-loop jitter, and a request 1 ms early at a strict upstream is a
 * 429. The margin costs the same 2% of throughput.
 *
 * Times are milliseconds on any monotonic clock (the local pacer uses performance.now); the
 * shared pacer runs the same rules in Redis (gcra-script.ts).
 */

/** A rate as configured: `requests` per `perMs`, plus `burst` at once. */
export interface PaceRate {
  /** Requests allowed in any window of `perMs` (> 0). */
  requests: number;
  /** The window, in ms (> 0). */
  perMs: number;
  /** Extra requests that may go at once beyond even spacing; 0: strictly even. Below `requests`. */
  burst: number;
  /** Added to the window against jitter; default {@link defaultMarginMs}. */
  marginMs?: number | undefined;
}

/** The rate in the form the rules use. */
export interface PaceParams {
  /** At most this many departures in any `windowMs`. */
  readonly limit: number;
  /** `per` plus the margin. */
  readonly windowMs: number;
  /** T: the even spacing, `windowMs / limit`. */
  readonly intervalMs: number;
  /** τ: how far ahead of even spacing a request may go, `burst · T`. */
  readonly toleranceMs: number;
  readonly burst: number;
  /** False when burst is 0: the spacing alone keeps the window cap. */
  readonly keepsLog: boolean;
}

/** One key's pacing state. Only {@link admitAt} and {@link expireLog} change it. */
export interface PaceState {
  tatMs: number;
  /**
   * Departure times, oldest first, as a ring (only when burst > 0). It holds at most `limit`
   * entries and grows to that as needed: a quiet key with a large limit stays small.
   */
  log: Float64Array | undefined;
  logHead: number;
  logSize: number;
}

/** First size of a departure log. */
const INITIAL_LOG_SLOTS = 16;

/** Starts below this are "now": float sums of T must not turn into 1 ms timers. */
const EPSILON_MS = 1e-6;

/** 2% of the window, at least 10 ms and at most 1 s. */
export function defaultMarginMs(perMs: number): number {
  return Math.min(1_000, Math.max(10, perMs * 0.02));
}

export function paceParams(rate: PaceRate): PaceParams {
  const limit = Math.max(1, Math.floor(rate.requests));
  // A burst of `limit` or more would ask for more than the cap ever allows at once.
  const burst = Math.min(Math.max(0, Math.floor(rate.burst)), limit - 1);
  const windowMs = rate.perMs + (rate.marginMs ?? defaultMarginMs(rate.perMs));
  const intervalMs = windowMs / limit;
  return {
    limit,
    windowMs,
    intervalMs,
    toleranceMs: burst * intervalMs,
    burst,
    keepsLog: burst > 0,
  };
}

export function createPaceState(params: PaceParams): PaceState {
  return {
    tatMs: Number.NEGATIVE_INFINITY,
    log: params.keepsLog ? new Float64Array(Math.min(params.limit, INITIAL_LOG_SLOTS)) : undefined,
    logHead: 0,
    logSize: 0,
  };
}

/** The soonest a request may go, `nowMs` or later. */
export function earliestStartMs(state: PaceState, params: PaceParams, nowMs: number): number {
  let startMs = state.tatMs - params.toleranceMs;
  if (startMs < nowMs + EPSILON_MS) startMs = nowMs;
  const log = state.log;
  if (log !== undefined && state.logSize >= params.limit) {
    // The ring is full: its oldest entry is the limit-th most recent departure.
    const capMs = log[state.logHead]! + params.windowMs;
    if (capMs > startMs + EPSILON_MS) startMs = capMs;
  }
  return startMs;
}

/**
 * Records a departure at `atMs` (at or after {@link earliestStartMs}, never earlier than a
 * departure already recorded) and returns how many more could go at `atMs` without waiting.
 */
export function admitAt(state: PaceState, params: PaceParams, atMs: number): number {
  state.tatMs = Math.max(state.tatMs, atMs) + params.intervalMs;
  if (state.log !== undefined) {
    expireLog(state, params, atMs);
    if (state.logSize === state.log.length && state.logSize < params.limit) growLog(state, params);
    const log = state.log;
    log[(state.logHead + state.logSize) % log.length] = atMs;
    if (state.logSize < log.length) state.logSize++;
    else state.logHead = (state.logHead + 1) % log.length;
  }
  return remainingAt(state, params, atMs);
}

/** How many requests could go at `atMs` at once, before anyone else does. */
export function remainingAt(state: PaceState, params: PaceParams, atMs: number): number {
  const aheadMs = Math.max(state.tatMs, atMs) - atMs;
  if (aheadMs > params.toleranceMs + EPSILON_MS) return 0;
  const spacing = Math.min(
    params.burst + 1,
    Math.floor((params.toleranceMs - aheadMs + EPSILON_MS) / params.intervalMs) + 1,
  );
  if (state.log === undefined) return spacing;
  expireLog(state, params, atMs);
  return Math.min(spacing, params.limit - state.logSize);
}

/** When the whole allowance (burst + 1 at once) is back, if nobody else goes. */
export function fullAgainAtMs(state: PaceState, params: PaceParams): number {
  const log = state.log;
  if (log === undefined || state.logSize === 0) return state.tatMs;
  // The cap allows burst + 1 again once all but `limit - burst - 1` logged departures are old.
  const keep = params.limit - params.burst - 1;
  if (state.logSize <= keep) return state.tatMs;
  const index = (state.logHead + state.logSize - 1 - keep) % log.length;
  return Math.max(state.tatMs, log[index]! + params.windowMs);
}

/** True when the state is as good as new at `nowMs` (the key may be forgotten). */
export function isIdle(state: PaceState, params: PaceParams, nowMs: number): boolean {
  if (state.tatMs > nowMs) return false;
  if (state.log === undefined || state.logSize === 0) return true;
  const newest = state.log[(state.logHead + state.logSize - 1) % state.log.length]!;
  return newest <= nowMs - params.windowMs;
}

/** Forgets departures that no window still to come can contain. */
export function expireLog(state: PaceState, params: PaceParams, nowMs: number): void {
  const log = state.log;
  if (log === undefined) return;
  const oldMs = nowMs - params.windowMs;
  while (state.logSize > 0 && log[state.logHead]! <= oldMs) {
    state.logHead = (state.logHead + 1) % log.length;
    state.logSize--;
  }
}

/** Doubles the log's ring (up to `limit` slots), oldest entry first. */
function growLog(state: PaceState, params: PaceParams): void {
  const old = state.log!;
  const grown = new Float64Array(Math.min(params.limit, old.length * 2));
  for (let i = 0; i < state.logSize; i++) grown[i] = old[(state.logHead + i) % old.length]!;
  state.log = grown;
  state.logHead = 0;
}
