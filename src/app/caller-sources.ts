/**
 * What caller authorization keeps across reloads: the failure throttle (a reload must not reset
 * a password guesser's count), the credentials each connection proved, the process's one
 * password check queue (`callers.basic.maxConcurrentChecks` bounds the whole process, not each
 * configuration), the recent denials for /status, and the authenticator of each `callers`
 * setting in use — a reload that leaves `callers` alone keeps its verified-credential cache and
 * file watchers. The authenticator (bcrypt, jose) is imported only when some upstream's `allow`
 * names callers.
 */

import { rulesNameCallers } from "../callers/allow.js";
import type { CallerAuthenticator } from "../callers/authenticate.js";
import { type CallerGate, createCallerGate } from "../callers/caller-gate.js";
import type { CallersStatus } from "../callers/caller-types.js";
import { createConnectionProofs } from "../callers/connection-proofs.js";
import { createDenialLog, type DenialLog } from "../callers/denial-log.js";
import { createFailureThrottle } from "../callers/failure-throttle.js";
import type { PasswordChecks } from "../callers/password-checks.js";
import type { ProxyConfig } from "../config/proxy-config.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";

export interface CallerSources {
  /** The gate of `config` (its rules compiled; its authenticator shared or loading). */
  gateFor(config: ProxyConfig): CallerGate;
  denials: DenialLog;
  /** What /status shows of the callers room; undefined while no authenticator is loaded. */
  status(): CallersStatus | undefined;
  /** Close the authenticators no configuration in `inUse` needs any more. */
  retain(inUse: readonly ProxyConfig[]): void;
  close(): Promise<void>;
}

/** True when some upstream's rules name callers (not only addresses). */
function namesCallers(config: ProxyConfig): boolean {
  return config.upstreams.some((u) => rulesNameCallers(u.allow));
}

export function buildCallerSources(deps: {
  logger: Logger;
  metrics: Metrics;
  /** The throttle's monotonic clock; default performance.now. */
  now?: (() => number) | undefined;
}): CallerSources {
  const throttle = createFailureThrottle({ now: deps.now });
  const proofs = createConnectionProofs({ now: throttle.now });
  const denials = createDenialLog();
  const authenticators = new Map<string, Promise<CallerAuthenticator>>();
  /** The loaded ones, by the same key, for the synchronous /status. */
  const loaded = new Map<string, CallerAuthenticator>();
  /** One queue for the process, built with the first Basic authenticator (it loads bcrypt). */
  let passwordChecks: Promise<PasswordChecks> | undefined;
  let checksNow: PasswordChecks | undefined;
  const checksFor = () => {
    passwordChecks ??= import("../callers/password-checks.js").then(({ createPasswordChecks }) => {
      const checks = createPasswordChecks({
        onStart: () => deps.metrics.callerPasswordChecksTotal.inc(),
        warn: (message, detail) => deps.logger.warn(detail, message),
      });
      deps.metrics.watchPasswordChecks(() => checks.status().queued);
      checksNow = checks;
      return checks;
    });
    return passwordChecks;
  };
  const keyOf = (config: ProxyConfig) =>
    namesCallers(config) ? JSON.stringify(config.callers) : undefined;
  /** The key of the configuration in force: the first one built, then what `retain` keeps. */
  let liveKey: string | undefined;
  let started = false;

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
      loading = Promise.all([
        import("../callers/authenticate.js"),
        config.callers.basic ? checksFor() : undefined,
      ]).then(([{ createCallerAuthenticator }, checks]) => {
        const authenticator = createCallerAuthenticator({
          callers: config.callers,
          logger: deps.logger,
          passwordChecks: checks,
        });
        loaded.set(key, authenticator);
        return authenticator;
      });
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
    gateFor(config) {
      if (!started) {
        started = true;
        liveKey = keyOf(config);
      }
      return createCallerGate({
        upstreams: config.upstreams,
        callers: config.callers,
        authenticator: authenticatorFor(config),
        throttle,
        proofs,
        denials,
        metrics: deps.metrics,
      });
    },
    denials,
    status() {
      const live = liveKey === undefined ? undefined : loaded.get(liveKey);
      if (!live) return undefined;
      const usersFile = live.usersFileStatus();
      return {
        ...(usersFile ? { usersFile } : {}),
        ...(checksNow ? { passwordChecks: checksNow.status() } : {}),
        blockedAddresses: throttle.blockedCount(),
      };
    },
    retain(inUse) {
      const keep = new Set(inUse.map(keyOf));
      // The reloader keeps only the configuration in force.
      if (inUse.length === 1) liveKey = keyOf(inUse[0]!);
      for (const [key, loading] of authenticators) {
        if (keep.has(key)) continue;
        authenticators.delete(key);
        loaded.delete(key);
        void closeAuthenticator(loading);
      }
    },
    async close() {
      const all = [...authenticators.values()];
      authenticators.clear();
      loaded.clear();
      await Promise.all(all.map(closeAuthenticator));
    },
  };
}
