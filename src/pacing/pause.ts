/**
 * "Slow down" from an upstream: a 429 or 503 with Retry-After pauses requests on this replica
 * until the time it named, cut to the receiving entry's `rateLimit.maxPause` (issue 26; issue 30
 * item 4). This file turns the header into a pause and keeps the pauses; the pacers (local-pacer.ts,
 * shared-pacer.ts) hold requests while one runs.
 *
 * Who is paused is the receiving entry's `pauseScope`: `upstream` (the default) pauses that
 * entry alone — one route's answer, perhaps provoked by one tenant, must not stop the routes,
 * `allow` lists and callers that merely share its client id; `credential` pauses every entry
 * spending the credential at that origin, for upstreams whose quota is the token's.
 */
import { retryAfterMs } from "../base/retry-after.js";

/** Why an upstream asked us to wait: the status that carried the Retry-After. */
export type PauseReason = "429" | "503";

/**
 * How long a "slow down" pauses its entry: the Retry-After's wait (base/retry-after.ts), cut to
 * `maxMs` (the entry's `rateLimit.maxPause`); undefined when absent or unreadable: no pause.
 */
export function pauseFromRetryAfter(
  value: string | readonly string[] | undefined,
  nowWallMs: number,
  maxMs: number,
): number | undefined {
  const waitMs = retryAfterMs(value, nowWallMs);
  return waitMs === undefined ? undefined : Math.min(waitMs, maxMs);
}

/** Pauses by key (an entry's, or a credential's at an origin), on the pacers' monotonic clock. */
export interface PauseTable {
  /** Pause `key` until `untilMs` (monotonic); an earlier end than one already set is ignored. */
  pause(key: string, untilMs: number, reason: PauseReason): void;
  /** End of the pause of `key` if it runs after `nowMs`, else 0. */
  untilMs(key: string, nowMs: number): number;
  /** Why `key` is paused, if it is at `nowMs`. */
  reason(key: string, nowMs: number): PauseReason | undefined;
  /**
   * Calls `listener` after each pause set or lengthened on `key` — a pacer re-plans its queue
   * then, so those who can't outlast the pause are told at once. Returns the unsubscribe.
   */
  watch(key: string, listener: () => void): () => void;
}

interface Pause {
  untilMs: number;
  reason: PauseReason;
}

/** An empty table; ended pauses are dropped as they are read. */
export function createPauseTable(): PauseTable {
  const pauses = new Map<string, Pause>();
  const watchers = new Map<string, Set<() => void>>();
  const current = (key: string, nowMs: number): Pause | undefined => {
    // The common case, nothing paused anywhere, costs one size check.
    if (pauses.size === 0) return undefined;
    const pause = pauses.get(key);
    if (pause === undefined) return undefined;
    if (pause.untilMs > nowMs) return pause;
    pauses.delete(key);
    return undefined;
  };
  return {
    pause(key, untilMs, reason) {
      const existing = pauses.get(key);
      if (existing !== undefined && existing.untilMs >= untilMs) return;
      pauses.set(key, { untilMs, reason });
      const listeners = watchers.get(key);
      if (listeners) for (const listener of [...listeners]) listener();
    },
    untilMs: (key, nowMs) => current(key, nowMs)?.untilMs ?? 0,
    reason: (key, nowMs) => current(key, nowMs)?.reason,
    watch(key, listener) {
      let listeners = watchers.get(key);
      if (listeners === undefined) {
        listeners = new Set();
        watchers.set(key, listeners);
      }
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
        if (listeners.size === 0 && watchers.get(key) === listeners) watchers.delete(key);
      };
    },
  };
}

/** Where one upstream entry's pauses live in the app's table. */
export interface PauseKeys {
  /** The entry's own key: a `pauseScope: upstream` answer pauses it alone. */
  entry: string;
  /** Its credential at its origin: every entry spending it honours a pause set here. */
  credential: string;
  /** Where an answer this entry receives goes (`rateLimit.pauseScope`). */
  scope: "upstream" | "credential";
}

/** The key of an entry's own pauses. */
export const entryPauseKey = (upstreamName: string) => `upstream\n${upstreamName}`;
/** The key of a credential's pauses at an origin (`credential` a credential identity). */
export const credentialPauseKey = (origin: string, credential: string) =>
  `credential\n${origin}\n${credential}`;

/** One entry's view of the pauses: its own and its credential's, whichever ends later. */
export interface EntryPauses {
  /** End of the pause holding this entry if one runs after `nowMs`, else 0. */
  untilMs(nowMs: number): number;
  reason(nowMs: number): PauseReason | undefined;
  /** This entry received a "slow down": pause by its scope until `untilMs`. */
  pause(untilMs: number, reason: PauseReason): void;
  /** `listener` runs after a pause holding this entry is set; returns the unsubscribe. */
  watch(listener: () => void): () => void;
}

export function createEntryPauses(table: PauseTable, keys: PauseKeys): EntryPauses {
  const { entry, credential } = keys;
  const target = keys.scope === "credential" ? credential : entry;
  const laterKey = (nowMs: number): string =>
    table.untilMs(credential, nowMs) > table.untilMs(entry, nowMs) ? credential : entry;
  return {
    untilMs(nowMs) {
      const own = table.untilMs(entry, nowMs);
      const shared = table.untilMs(credential, nowMs);
      return own > shared ? own : shared;
    },
    reason: (nowMs) => table.reason(laterKey(nowMs), nowMs),
    pause: (untilMs, reason) => table.pause(target, untilMs, reason),
    watch(listener) {
      const stopEntry = table.watch(entry, listener);
      const stopCredential = table.watch(credential, listener);
      return () => {
        stopEntry();
        stopCredential();
      };
    },
  };
}

/** Pauses of a pacer of its own (tests, and pacers built without a table). */
export function privatePauses(): EntryPauses {
  return createEntryPauses(createPauseTable(), {
    entry: "entry",
    credential: "credential",
    scope: "upstream",
  });
}
