/**
 * The minimum request body data rate, as Kestrel enforces it (`MinRequestBodyDataRate`, 240
 * bytes/s after a 5 s grace): the body's average rate since reading began, counting only time
 * the client is responsible for (not while the upstream's backpressure pauses reading). The
 * body idle timeout alone lets a client dribble one byte just inside it, forever.
 */

/** How often the rate is checked. */
const CHECK_INTERVAL_MS = 1_000;

export interface MinDataRate {
  /** Bytes per second; 0 turns the check off. */
  bytesPerSecond: number;
  /** Counted time before the rate is checked. */
  graceMs: number;
}

export interface UploadRateWatch {
  /** The body ended or reading stopped: no more checks. */
  stop(): void;
}

const NO_WATCH: UploadRateWatch = { stop() {} };

/** Calls `onTooSlow` once if the average rate falls below the minimum after the grace. */
export function watchUploadRate(
  rate: MinDataRate,
  bytesRead: () => number,
  /** True while the client is not to blame for missing bytes (upstream backpressure). */
  isPaused: () => boolean,
  onTooSlow: () => void,
): UploadRateWatch {
  if (rate.bytesPerSecond <= 0) return NO_WATCH;
  let countedMs = 0;
  const timer = setInterval(() => {
    if (isPaused()) return;
    countedMs += CHECK_INTERVAL_MS;
    if (countedMs <= rate.graceMs) return;
    if (bytesRead() / (countedMs / 1000) >= rate.bytesPerSecond) return;
    clearInterval(timer);
    onTooSlow();
  }, CHECK_INTERVAL_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
