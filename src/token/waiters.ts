/**
 * Requests waiting for a token while none is usable: each waits at most a bound, can be
 * aborted by its caller, and is settled together with the others when a fetch lands.
 */
import type { Clock } from "../base/clock.js";
import type { AccessToken } from "./token-provider.js";

interface Waiter {
  deadlineMs: number;
  settle(token: AccessToken | undefined, error?: unknown): void;
}

export interface WaiterSet {
  /** Wait up to `timeoutMs` for resolveAll; rejects with onTimeout() or the signal's reason. */
  wait(
    timeoutMs: number,
    signal: AbortSignal | undefined,
    onTimeout: () => Error,
  ): Promise<AccessToken>;
  resolveAll(token: AccessToken): void;
  /** Reject those whose deadline comes before `atMs` (they cannot see the next attempt). */
  rejectExpiringBefore(atMs: number, makeError: () => Error): void;
  rejectAll(makeError: () => Error): void;
  readonly size: number;
}

/** An empty set of waiting requests, timed on `clock`. */
export function createWaiterSet(clock: Clock): WaiterSet {
  const waiters = new Set<Waiter>();
  return {
    wait(timeoutMs, signal, onTimeout) {
      return new Promise<AccessToken>((resolve, reject) => {
        const onAbort = () => waiter.settle(undefined, signal?.reason);
        const waiter: Waiter = {
          deadlineMs: clock.now() + timeoutMs,
          settle(token, error) {
            if (!waiters.delete(waiter)) return;
            clock.clearTimeout(timer);
            signal?.removeEventListener("abort", onAbort);
            if (token) resolve(token);
            else reject(error);
          },
        };
        const timer = clock.setTimeout(() => waiter.settle(undefined, onTimeout()), timeoutMs);
        waiters.add(waiter);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
    },
    resolveAll(token) {
      for (const waiter of [...waiters]) waiter.settle(token);
    },
    rejectExpiringBefore(atMs, makeError) {
      for (const waiter of [...waiters]) {
        if (waiter.deadlineMs < atMs) waiter.settle(undefined, makeError());
      }
    },
    rejectAll(makeError) {
      for (const waiter of [...waiters]) waiter.settle(undefined, makeError());
    },
    get size() {
      return waiters.size;
    },
  };
}
