/**
 * A timeout that blames the peer only for time this process could have heard it. After a stall
 * of our own event loop (a CPU-throttled pod, a start compiling its code, a long GC) every timer
 * due meanwhile runs before the loop next polls its sockets, so a plain timer times out a reply
 * that is already there, or a command still waiting to be written. Here a timer that fires more
 * than half its wait late is armed once more, giving the peer a whole wait after the stall; and
 * any timeout waits for one more poll before it is told, for a reply that landed as it came due.
 */
import { type Clock, systemClock } from "./clock.js";

/** A timer later than this fraction of its wait counts as a stall of our own loop. */
const LATE_FRACTION = 0.5;

/** Clears the timeout; a no-op once it has been told. */
export type CancelTimeout = () => void;

/**
 * Calls `onTimeout` after `ms`, or after the stall and `ms` more when its timer came late: at
 * most twice `ms` plus the stall. `clock`'s timers are used (the system's are unref'd).
 */
export function stallTolerantTimeout(
  ms: number,
  onTimeout: () => void,
  clock: Pick<Clock, "now" | "setTimeout" | "clearTimeout"> = systemClock,
): CancelTimeout {
  let timer: unknown;
  let afterPoll: NodeJS.Immediate | undefined;
  const arm = (rearmIfLate: boolean): void => {
    const dueMs = clock.now() + ms;
    timer = clock.setTimeout(() => {
      if (rearmIfLate && clock.now() - dueMs > ms * LATE_FRACTION) arm(false);
      else afterPoll = setImmediate(onTimeout); // immediates run after the loop's next poll
    }, ms);
  };
  arm(true);
  return () => {
    clock.clearTimeout(timer);
    if (afterPoll !== undefined) clearImmediate(afterPoll);
  };
}

/**
 * `work`, or a rejection with `timeoutError()` after a stall-tolerant `ms` (as above); `work`
 * settling later is ignored, its rejection included.
 */
export function withStallTolerantTimeout<T>(
  work: Promise<T>,
  ms: number,
  timeoutError: () => Error,
  clock: Pick<Clock, "now" | "setTimeout" | "clearTimeout"> = systemClock,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const cancel = stallTolerantTimeout(ms, () => reject(timeoutError()), clock);
    work.then(
      (value) => {
        cancel();
        resolve(value);
      },
      (err: unknown) => {
        cancel();
        reject(err);
      },
    );
  });
}
