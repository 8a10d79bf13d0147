/**
 * Waiting in tests: on a condition (`waitFor`) wherever one can be named, and a plain `sleep`
 * only where the time itself is the point (a pause between requests, a lull, a timeline).
 */

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Poll every 20 ms until `condition` holds; throws naming `what` after `timeoutMs`. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 5_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/**
 * Holds this thread's event loop for `ms`, as a start compiling its code, a long GC or a
 * CPU-throttled pod does: timers and I/O due meanwhile run late.
 */
export function blockLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: nothing else runs
  }
}
