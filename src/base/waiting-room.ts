/**
 * Requests waiting for a pacing turn or an upstream's pause, over every listener, upstream and
 * configuration generation (issue 30 item 3).
 *
 * Waiting is not work: a parked request holds its client connection and a few kilobytes, but no
 * upstream connection and no CPU. So it leaves the process load (`limits.maxInFlight`, or
 * `maxUpgrades` for a handshake) while it waits: requests parked on one rate-limited route must
 * never make another upstream answer 503 `overloaded`, nor /readyz fail. What bounds them is
 * this room instead: `limits.maxWaiting` all together, `limits.maxWaitingPerCaller` for one
 * caller (so one caller can't take every place); beyond either, the request is answered 429
 * `rate_limited` at once. The memory a waiting request costs is measured in docs/benchmark.md, "Waiting requests".
 *
 * Process-wide like the load (process-load.ts): the lifecycle holds one of each, and the pacing
 * gate asks this one for a place.
 */

/** Which bound refused a place. */
export type WaitingBound = "max_waiting" | "max_waiting_per_caller";

export interface WaitingLimits {
  maxWaiting: number;
  maxWaitingPerCaller: number;
}

/** For /status. */
export interface WaitingState {
  /** Requests waiting now. */
  waiting: number;
  /** Callers with at least one request waiting. */
  callers: number;
  /** The most requests one caller has waiting. */
  mostByOneCaller: number;
  /** Places refused since start, by bound. */
  refused: Record<WaitingBound, number>;
}

export interface WaitingRoom {
  /** Requests waiting now (read at every scrape). */
  readonly waiting: number;
  /**
   * Takes a place for one request of `caller` (the identity an `allow` rule established, else
   * `addr:<peer>`); the bound reached when there is none (the refusal is counted).
   */
  enter(caller: string, limits: WaitingLimits): WaitingBound | undefined;
  /** One request of `caller` stopped waiting (its turn came, it was refused, or its client left). */
  leave(caller: string): void;
  state(): WaitingState;
}

export function createWaitingRoom(): WaitingRoom {
  let waiting = 0;
  /** Waiting requests by caller; a caller leaves the map with its last one. */
  const byCaller = new Map<string, number>();
  const refused: Record<WaitingBound, number> = { max_waiting: 0, max_waiting_per_caller: 0 };
  return {
    get waiting() {
      return waiting;
    },
    enter(caller, limits) {
      if (waiting >= limits.maxWaiting) {
        refused.max_waiting++;
        return "max_waiting";
      }
      const mine = byCaller.get(caller) ?? 0;
      if (mine >= limits.maxWaitingPerCaller) {
        refused.max_waiting_per_caller++;
        return "max_waiting_per_caller";
      }
      byCaller.set(caller, mine + 1);
      waiting++;
      return undefined;
    },
    leave(caller) {
      const mine = byCaller.get(caller);
      if (mine === undefined) return;
      if (mine > 1) byCaller.set(caller, mine - 1);
      else byCaller.delete(caller);
      waiting--;
    },
    state() {
      let most = 0;
      for (const count of byCaller.values()) if (count > most) most = count;
      return { waiting, callers: byCaller.size, mostByOneCaller: most, refused: { ...refused } };
    },
  };
}
