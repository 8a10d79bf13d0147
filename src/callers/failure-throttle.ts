/**
 * Slows repeated authentication failures from one peer address, so the proxy is no fast oracle
 * for guessing passwords (bcrypt already makes each guess cost ~100 ms of our CPU: this also
 * keeps a guesser from spending it). After `maxFailures` failures within `windowMs` the address
 * is refused for `blockMs` without any verification. Memory is bounded: the least recently seen
 * addresses are forgotten first.
 */
import { LRUCache } from "lru-cache";
import { unmapIpv4 } from "./types.js";

export interface FailureThrottle {
  /** Seconds to put in Retry-After while `address` is blocked; 0 when it is not. */
  blockedFor(address: string): number;
  /** One more failed credential from `address`; may start a block. */
  recordFailure(address: string): void;
}

export interface FailureThrottleOptions {
  /** Failures within `windowMs` that start a block. Default 10. */
  maxFailures?: number | undefined;
  /** Default 60 s. */
  windowMs?: number | undefined;
  /** Default 60 s. */
  blockMs?: number | undefined;
  /** Monotonic or wall-clock ms; default performance.now. */
  now?: (() => number) | undefined;
  /** Addresses remembered at once. Default 10,000. */
  maxAddresses?: number | undefined;
}

interface AddressState {
  /** Failures since `windowStartMs`. */
  failures: number;
  windowStartMs: number;
  /** 0 when not blocked. */
  blockedUntilMs: number;
}

/** A throttle for one listener (or the whole process). */
export function createFailureThrottle(options: FailureThrottleOptions = {}): FailureThrottle {
  const maxFailures = options.maxFailures ?? 10;
  const windowMs = options.windowMs ?? 60_000;
  const blockMs = options.blockMs ?? 60_000;
  const now = options.now ?? (() => performance.now());
  const states = new LRUCache<string, AddressState>({ max: options.maxAddresses ?? 10_000 });

  return {
    blockedFor(address) {
      const state = states.peek(unmapIpv4(address));
      if (!state) return 0;
      const remainingMs = state.blockedUntilMs - now();
      return remainingMs > 0 ? Math.ceil(remainingMs / 1000) : 0;
    },
    recordFailure(address) {
      const key = unmapIpv4(address);
      const at = now();
      let state = states.get(key);
      if (!state) {
        state = { failures: 0, windowStartMs: at, blockedUntilMs: 0 };
        states.set(key, state);
      }
      // A fixed window per address: simple, and at most 2 × maxFailures guesses slip through
      // around a window edge, which is still a rate of guesses per minute.
      if (at - state.windowStartMs >= windowMs) {
        state.failures = 0;
        state.windowStartMs = at;
      }
      state.failures += 1;
      if (state.failures >= maxFailures) {
        state.blockedUntilMs = at + blockMs;
        state.failures = 0;
        state.windowStartMs = at;
      }
    },
  };
}
