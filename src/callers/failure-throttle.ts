/**
 * Slows repeated authentication failures from one peer address, so the proxy is no fast oracle
 * for guessing passwords and no guesser can spend the gateway's CPU on bcrypt. After
 * `maxFailures` failures within `windowMs` the address is refused for `blockMs` without any
 * verification. An IPv6 address counts with its whole /64 (peer-address.ts `throttleKey`): one
 * host commonly holds that many addresses.
 *
 * A verification counts as a failure from the moment it starts (`begin`) until it ends: a
 * success gives it back. Counting only finished failures let a parallel burst start a hundred
 * bcrypt checks before the first one failed (issue 30); now at most `maxFailures` verifications
 * of one address run or wait at once, and the rest are refused at once.
 *
 * Memory is bounded twice, so that churn of other addresses never lifts a block: the counts of
 * addresses that are not blocked sit in an LRU of `maxAddresses` (evicting one forgets fewer than
 * `maxFailures` failures), and the blocks sit in a table of their own of `maxBlocked` entries.
 * Every block lasts `blockMs`, so that table's insertion order is the order in which the blocks
 * end: expired blocks are dropped from its front, and at the bound the block nearest to its end
 * makes room. Pushing a given block out takes `maxBlocked` newer blocks (10 failures each from
 * as many addresses) within its minute — 500,000 failed credentials a minute at the defaults,
 * more than one process answers.
 */
import { LRUCache } from "lru-cache";
import { throttleKey } from "../base/peer-address.js";

/** A block in force. */
export interface AddressBlock {
  /** When the block began, on the throttle's clock (see {@link FailureThrottle.now}). */
  sinceMs: number;
  /** Seconds until it ends, rounded up (the Retry-After). */
  retryAfterSeconds: number;
}

/** A verification that counts as one failure of its address until it ends. */
export interface VerificationTicket {
  admitted: true;
  /** `failed`: the credential was wrong (the count stays); false gives it back. Idempotent. */
  end(failed: boolean): void;
}

/** A verification refused before it started. */
export interface VerificationRefusal {
  admitted: false;
  /** The block's remaining seconds, or 1 when the address's verifications in flight fill its budget. */
  retryAfterSeconds: number;
}

export interface FailureThrottle {
  /** The block in force on `address`, or undefined. */
  blockOf(address: string): AddressBlock | undefined;
  /** Seconds to put in Retry-After while `address` is blocked; 0 when it is not. */
  blockedFor(address: string): number;
  /**
   * Start a verification for `address`: refused when the address is blocked, or when its
   * failures in the window plus its verifications in flight reach `maxFailures`.
   */
  begin(address: string): VerificationTicket | VerificationRefusal;
  /** One more failed credential from `address`; may start a block. */
  recordFailure(address: string): void;
  /** Addresses blocked now (for /status). */
  blockedCount(): number;
  /** The throttle's clock, in ms (monotonic by default). */
  now(): number;
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
  /** Addresses whose failures (short of a block) are remembered at once. Default 10,000. */
  maxAddresses?: number | undefined;
  /** Blocks remembered at once. Default 50,000 (~140 bytes each: ~7 MiB of IPv6 addresses). */
  maxBlocked?: number | undefined;
}

export const DEFAULT_MAX_FAILURES = 10;
export const DEFAULT_MAX_BLOCKED_ADDRESSES = 50_000;

interface FailureWindow {
  /** Failures since `windowStartMs`. */
  failures: number;
  windowStartMs: number;
}

/** A throttle for one listener (or the whole process). */
export function createFailureThrottle(options: FailureThrottleOptions = {}): FailureThrottle {
  const maxFailures = options.maxFailures ?? DEFAULT_MAX_FAILURES;
  const windowMs = options.windowMs ?? 60_000;
  const blockMs = options.blockMs ?? 60_000;
  const maxBlocked = options.maxBlocked ?? DEFAULT_MAX_BLOCKED_ADDRESSES;
  const now = options.now ?? (() => performance.now());
  const maxAddresses = options.maxAddresses ?? 10_000;
  // Built at the first failure: lru-cache allocates its slots up front (~220 KiB for 10,000),
  // and a sidecar whose callers never fail a password, or that names no callers, pays nothing.
  let windowsIfAny: LRUCache<string, FailureWindow> | undefined;
  const windows = () => {
    windowsIfAny ??= new LRUCache<string, FailureWindow>({ max: maxAddresses });
    return windowsIfAny;
  };
  /** address → when its block ends; insertion order is end order (every block lasts blockMs). */
  const blocks = new Map<string, number>();
  /** address → verifications running or queued; an entry lives only while one does. */
  const inFlight = new Map<string, number>();

  function blockOfKey(key: string, at: number): AddressBlock | undefined {
    const untilMs = blocks.get(key);
    if (untilMs === undefined) return undefined;
    if (untilMs <= at) {
      blocks.delete(key);
      return undefined;
    }
    return { sinceMs: untilMs - blockMs, retryAfterSeconds: Math.ceil((untilMs - at) / 1000) };
  }

  function block(key: string, at: number): void {
    for (const [address, untilMs] of blocks) {
      if (untilMs > at && blocks.size < maxBlocked) break;
      blocks.delete(address);
    }
    blocks.delete(key); // an expired entry of its own would keep its old place in the order
    blocks.set(key, at + blockMs);
    windowsIfAny?.delete(key);
  }

  function failuresInWindow(key: string, at: number): number {
    const window = windowsIfAny?.peek(key);
    return window && at - window.windowStartMs < windowMs ? window.failures : 0;
  }

  function recordFailureOf(key: string): void {
    const at = now();
    if (blockOfKey(key, at)) return;
    const windowsNow = windows();
    let window = windowsNow.get(key);
    // A fixed window per address: simple, and at most 2 × maxFailures guesses slip through
    // around a window edge, which is still a rate of guesses per minute.
    if (!window || at - window.windowStartMs >= windowMs) {
      window = { failures: 0, windowStartMs: at };
      windowsNow.set(key, window);
    }
    window.failures += 1;
    if (window.failures >= maxFailures) block(key, at);
  }

  return {
    // Asked on every request with a credential: with no address blocked (the usual state) the
    // answer needs neither the clock nor the address's key.
    blockOf: (address) => (blocks.size === 0 ? undefined : blockOfKey(throttleKey(address), now())),
    blockedFor: (address) => blockOfKey(throttleKey(address), now())?.retryAfterSeconds ?? 0,
    begin(address) {
      const key = throttleKey(address);
      const at = now();
      const blocked = blockOfKey(key, at);
      if (blocked) return { admitted: false, retryAfterSeconds: blocked.retryAfterSeconds };
      const running = inFlight.get(key) ?? 0;
      if (failuresInWindow(key, at) + running >= maxFailures) {
        // Not blocked yet: the verifications in flight may all succeed and give their count back.
        return { admitted: false, retryAfterSeconds: 1 };
      }
      inFlight.set(key, running + 1);
      let ended = false;
      return {
        admitted: true,
        end(failed) {
          if (ended) return;
          ended = true;
          const left = (inFlight.get(key) ?? 1) - 1;
          if (left > 0) inFlight.set(key, left);
          else inFlight.delete(key);
          if (failed) recordFailureOf(key);
        },
      };
    },
    recordFailure: (address) => recordFailureOf(throttleKey(address)),
    blockedCount() {
      const at = now();
      for (const [address, untilMs] of blocks) {
        if (untilMs > at) break;
        blocks.delete(address);
      }
      return blocks.size;
    },
    now,
  };
}
