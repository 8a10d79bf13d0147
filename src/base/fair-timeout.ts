/**
 * A timeout that blames the peer only for time this process could have heard it. A timer that
 * fires late fired after a stall of our own event loop (a CPU-throttled pod, a start compiling
 * its code, a long GC): the reply may be sitting unread in the socket, since timers run before
 * I/O in a loop turn. Such a timer is armed once more, so the I/O gets its turn and the peer
 * gets a fair wait; a timer on time, or late a second time, times out.
 */

/** A timer later than this fraction of its wait counts as a stall of our own loop. */
const LATE_FRACTION = 0.5;

/** Clears the timer; a no-op after it has fired. */
export type CancelTimeout = () => void;

/**
 * Calls `onTimeout` after `ms` of a fair wait (see above): at most twice `ms` plus the stall.
 * The timer is unref'd when `unref` is set. `now` is a monotonic clock in ms.
 */
export function fairTimeout(
  ms: number,
  onTimeout: () => void,
  options: { unref?: boolean; now?: () => number } = {},
): CancelTimeout {
  const now = options.now ?? (() => performance.now());
  let timer: NodeJS.Timeout;
  const arm = (rearmIfLate: boolean): void => {
    const due = now() + ms;
    timer = setTimeout(() => {
      if (rearmIfLate && now() - due > ms * LATE_FRACTION) arm(false);
      else onTimeout();
    }, ms);
    if (options.unref) timer.unref();
  };
  arm(true);
  return () => clearTimeout(timer);
}
