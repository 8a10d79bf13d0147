/**
 * Time as the token engine and the pacers see it: a monotonic clock for expiry and scheduling,
 * wall time only for status and metrics, and timers that tests can replace (lru-cache takes
 * `perf` the same way).
 */

/**
 * The longest delay a Node.js timer holds: a longer one fires after 1 ms (TimeoutOverflowWarning).
 * config/units.ts caps every configured duration at it.
 */
export const MAX_TIMER_MS = 2_147_483_647;

export interface Clock {
  /** Monotonic milliseconds; never jumps with NTP or DST. */
  now(): number;
  /** Wall-clock milliseconds since the epoch, for display and metrics only. */
  wallNow(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/**
 * The real clock. Timers are unref'd: token refreshes must never keep a process alive on
 * their own (the listeners do that).
 */
export const systemClock: Clock = Object.freeze({
  now: () => performance.now(),
  wallNow: () => Date.now(),
  setTimeout: (fn: () => void, ms: number) => {
    // Node fires a delay above 2^31 - 1 ms after 1 ms; waiting 24.8 days instead is harmless.
    const handle = setTimeout(fn, Math.min(ms, MAX_TIMER_MS));
    handle.unref();
    return handle;
  },
  clearTimeout: (handle: unknown) => clearTimeout(handle as NodeJS.Timeout),
});
