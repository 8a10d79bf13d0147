/**
 * The last refusals of caller authorization, for /status: an operator asking "why does the cron
 * job get 407?" sees who was refused where and why, without grepping logs. Bounded; the caller
 * is a label (`user:…`, `sa:…`, `addr:…`), never a credential.
 */

/** Why a caller was refused; also the `reason` label of bearer_proxy_caller_denied_total. */
export type DenyReason =
  | "no_credential"
  | "invalid_credential"
  | "not_allowed"
  | "throttled"
  /** A service-account token that could not be checked: the cluster's keys are unavailable. */
  | "keys_unavailable"
  /** A password that could not be checked: the process's check queue was full. */
  | "checks_busy";

export interface Denial {
  /** ISO time of the refusal. */
  at: string;
  upstream: string;
  reason: DenyReason;
  caller: string;
}

export interface DenialLog {
  record(denial: Omit<Denial, "at">): void;
  /** Newest first. */
  recent(): Denial[];
}

export function createDenialLog(size = 50, now: () => number = Date.now): DenialLog {
  const ring: Denial[] = [];
  let next = 0;
  return {
    record(denial) {
      const entry = { at: new Date(now()).toISOString(), ...denial };
      if (ring.length < size) ring.push(entry);
      else ring[next] = entry;
      next = (next + 1) % size;
    },
    recent() {
      const ordered =
        ring.length < size ? ring.slice() : [...ring.slice(next), ...ring.slice(0, next)];
      return ordered.reverse();
    },
  };
}
