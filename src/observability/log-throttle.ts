/**
 * "Say it at most once a minute, with how many": for a condition that can recur on every request
 * (a key outage, a Redis failure, spans dropped), where a log line per occurrence would flood
 * the log. Counts occurrences and says when a line is due — the first time, then at most once
 * per interval — with the count since the last line.
 */
export interface LogThrottle {
  /** `n` more occurrences (default 1). */
  count(n?: number): void;
  /** The occurrences not told yet, when there are some and a line is due now; then they are told. */
  takeIfDue(): number | undefined;
  /** The occurrences not told yet (0 if none), due or not: for a closing or recovery line. */
  take(): number;
}

/** `now`: the clock the interval is measured on (default performance.now). */
export function createLogThrottle(
  intervalMs: number,
  now: () => number = () => performance.now(),
): LogThrottle {
  let pending = 0;
  let toldAtMs = Number.NEGATIVE_INFINITY;
  const take = (): number => {
    const told = pending;
    if (told > 0) toldAtMs = now();
    pending = 0;
    return told;
  };
  return {
    count(n = 1) {
      pending += n;
    },
    takeIfDue() {
      if (pending === 0 || now() - toldAtMs < intervalMs) return undefined;
      return take();
    },
    take,
  };
}
