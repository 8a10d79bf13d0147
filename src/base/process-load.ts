/**
 * Process-wide load shedding (`limits.maxInFlight`): past the limit a request gets a fast
 * `503 overloaded` with Retry-After instead of joining an unbounded pile of waiting work (the
 * pool queue, token waits, buffered bodies). Refusals that keep coming for
 * `limits.sustainedOverload` make /readyz fail, so a load balancer shifts traffic to other
 * replicas; a short burst does not.
 */

/** Refusals further apart than this are separate bursts, not one sustained overload. */
const BURST_GAP_MS = 1_000;

export interface ProcessLoad {
  /** Requests admitted and not finished, over every listener. */
  readonly inFlight: number;
  /** Admits a request unless `limit` (> 0) are in flight already; a refusal is recorded. */
  tryEnter(limit: number): boolean;
  /**
   * A request that left while it waited for a pacing turn (waiting-room.ts) is back with
   * its turn: counted again whatever the load. It held a slot when it arrived, and refusing it
   * now would waste the turn it waited for; a new request meanwhile sees the count and is
   * refused as usual (which is what /readyz watches). Not for upgrades: see proxy/upgrade-entry.ts.
   */
  readmit(): void;
  /** An admitted request finished (or started waiting). */
  leave(): void;
  /** True while requests have been refused, without a pause, for at least `ms`. */
  overloadedFor(ms: number): boolean;
}

export function createProcessLoad(now: () => number = Date.now): ProcessLoad {
  let inFlight = 0;
  let overloadStartMs: number | undefined;
  let lastRefusalMs = 0;
  return {
    get inFlight() {
      return inFlight;
    },
    tryEnter(limit) {
      if (limit > 0 && inFlight >= limit) {
        const at = now();
        if (overloadStartMs === undefined || at - lastRefusalMs > BURST_GAP_MS) {
          overloadStartMs = at;
        }
        lastRefusalMs = at;
        return false;
      }
      inFlight++;
      return true;
    },
    readmit() {
      inFlight++;
    },
    leave() {
      inFlight--;
    },
    overloadedFor(ms) {
      if (overloadStartMs === undefined) return false;
      const at = now();
      return at - lastRefusalMs <= BURST_GAP_MS && at - overloadStartMs >= ms;
    },
  };
}
