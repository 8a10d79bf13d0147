/**
 * What caller authorization keeps across reloads: the failure throttle (a reload must not reset
 * a password guesser's count), the recent denials for /status, and the authenticator of each
 * `callers` setting in use — a reload that leaves `callers` alone keeps its verified-credential
 * cache and file watchers. The authenticator (bcryptjs, jose) is imported only when some
 * upstream's `allow` names callers.
 */

import { rulesNameCallers } from "../callers/allow.js";
import type { CallerAuthenticator } from "../callers/authenticate.js";
import { type CallerGate, createCallerGate } from "../callers/caller-gate.js";
import { createDenialLog, type DenialLog } from "../callers/denial-log.js";
import { createFailureThrottle } from "../callers/failure-throttle.js";
import type { ProxyConfig } from "../config/types.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";

export interface CallerSources {
  /** The gate of `config` (its rules compiled; its authenticator shared or loading). */
  gateFor(config: ProxyConfig): CallerGate;
  denials: DenialLog;
  /** Close the authenticators no configuration in `inUse` needs any more. */
  retain(inUse: readonly ProxyConfig[]): void;
  close(): Promise<void>;
}

/** True when some upstream's rules name callers (not only addresses). */
function namesCallers(config: ProxyConfig): boolean {
  return config.upstreams.some((u) => rulesNameCallers(u.allow));
}

export function buildCallerSources(deps: { logger: Logger; metrics: Metrics }): CallerSources {
  const throttle = createFailureThrottle();
  const denials = createDenialLog();
  const authenticators = new Map<string, Promise<CallerAuthenticator>>();
  const keyOf = (config: ProxyConfig) =>
    namesCallers(config) ? JSON.stringify(config.callers) : undefined;

  const authenticatorFor = (config: ProxyConfig) => {
    const key = keyOf(config);
    if (key === undefined) return undefined;
    let loading = authenticators.get(key);
    if (loading) {
      // Kept across the reload: re-read its files now, so rules checked against today's users
      // file meet today's users (the poll would catch up within a second).
      const kept = loading;
      loading = kept.then(async (authenticator) => {
        await authenticator.refresh();
        return authenticator;
      });
    } else {
      loading = import("../callers/authenticate.js").then(({ createCallerAuthenticator }) =>
        createCallerAuthenticator({ callers: config.callers, logger: deps.logger }),
      );
      // A failed load is reported by the gate's ready() (start or reload refuses); forget it so
      // the next attempt reads the files again.
      loading.catch(() => authenticators.delete(key));
      authenticators.set(key, loading);
    }
    return loading;
  };

  const closeAuthenticator = (loading: Promise<CallerAuthenticator>) =>
    loading.then((a) => a.close()).catch(() => {});

  return {
    gateFor: (config) =>
      createCallerGate({
        upstreams: config.upstreams,
        callers: config.callers,
        authenticator: authenticatorFor(config),
        throttle,
        denials,
        metrics: deps.metrics,
      }),
    denials,
    retain(inUse) {
      const keep = new Set(inUse.map(keyOf));
      for (const [key, loading] of authenticators) {
        if (keep.has(key)) continue;
        authenticators.delete(key);
        void closeAuthenticator(loading);
      }
    },
    async close() {
      const all = [...authenticators.values()];
      authenticators.clear();
      await Promise.all(all.map(closeAuthenticator));
    },
  };
}
