/**
 * Config reload: build the next generation, swap it in, retire the old one once its requests are
 * done (Caddy `Load`: run the new config, then stop the old). Every outcome is counted and kept
 * for /status.
 */
import type { LastReload } from "../admin/status-report.js";
import type { ProxyConfig } from "../config/proxy-config.js";
import { errorMessage } from "../errors.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { ReloadTrigger } from "../reload/config-watcher.js";
import { changesNeedingRestart } from "../reload/live-changes.js";
import type { ReloadOutcome } from "../reload/reload-on-change.js";
import type { CallerSources } from "./caller-sources.js";
import { buildGeneration, type Generation, type LiveGeneration } from "./generation.js";
import type { ProxyServers } from "./servers.js";
import type { TokenSources } from "./token-sources.js";

export interface Reloader {
  reload(next: ProxyConfig, trigger?: ReloadTrigger): Promise<ReloadOutcome>;
  recordRejected(problems: string[], trigger?: ReloadTrigger): ReloadOutcome;
  lastReload(): LastReload | undefined;
  /** Shutting down: later reloads are rejected and nothing more retires. */
  stop(): void;
}

export function createReloader(deps: {
  live: LiveGeneration;
  sources: TokenSources;
  callerSources: CallerSources;
  proxies: ProxyServers;
  metrics: Metrics;
  logger: Logger;
}): Reloader {
  const { live, sources, callerSources, proxies, metrics, logger } = deps;
  let lastReload: LastReload | undefined;
  let closing = false;

  const record = (
    trigger: ReloadTrigger,
    outcome: ReloadOutcome,
    detail: Pick<LastReload, "problems" | "restartRequired"> = {},
  ): ReloadOutcome => {
    metrics.configReloadsTotal.inc({ outcome: outcome.outcome });
    lastReload = { at: new Date().toISOString(), trigger, outcome: outcome.outcome, ...detail };
    return outcome;
  };
  const rejected = (trigger: ReloadTrigger, problems: string[]) =>
    record(trigger, { outcome: "rejected", problems }, { problems });

  async function reload(
    next: ProxyConfig,
    trigger: ReloadTrigger = "SIGHUP",
  ): Promise<ReloadOutcome> {
    if (closing) return rejected(trigger, ["the proxy is shutting down"]);
    const restartRequired = changesNeedingRestart(live.generation.config, next);
    if (restartRequired.length > 0) {
      return record(
        trigger,
        { outcome: "restart_required", paths: restartRequired },
        { restartRequired },
      );
    }
    let built: Generation;
    try {
      // buildGeneration builds dispatchers first: an unreadable CA or key file rejects the reload
      // before anything moved.
      built = buildGeneration(next, sources, callerSources, live.generation.tokens);
      // A users or JWKS file that changed under a new `callers` must load before anything moves.
      await built.callers.ready();
    } catch (error) {
      callerSources.retain([live.generation.config]);
      sources.pacers.retain([live.generation.pacing]);
      return rejected(trigger, [errorMessage(error)]);
    }
    if (closing) return rejected(trigger, ["the proxy is shutting down"]);
    swap(built);
    return record(trigger, { outcome: "applied" });
  }

  /** Route by `next` from now on; the replaced generation retires once its requests are done. */
  function swap(next: Generation): void {
    const old = live.generation;
    proxies.route(next);
    live.generation = next;
    // A removed upstream's expiry series would otherwise stay at its last value.
    const kept = new Set(next.config.upstreams.map((u) => u.name));
    for (const upstream of old.config.upstreams) {
      if (!kept.has(upstream.name))
        metrics.tokenExpiryTimestampSeconds.remove({ upstream: upstream.name });
    }
    logger.level = next.config.log.level;
    // Added credentials prefetch as at start; adopted ones keep their schedule (start is a no-op).
    next.tokens.startEager();
    retire(old);
  }

  /**
   * Once no request runs on a replaced routing any more (or `shutdown.timeout` passed), the old
   * registry closes its sources that did not move (removed credentials) and the dispatchers no
   * upstream uses any more close (undici lets their last requests finish).
   */
  function retire(old: Generation): void {
    const deadline = performance.now() + live.generation.config.shutdown.timeoutMs;
    const timer = setInterval(() => {
      const running = proxies.retiredInFlight();
      if (running > 0 && performance.now() < deadline && !closing) return;
      clearInterval(timer);
      if (closing) return;
      old.tokens.close();
      void sources.pool.closeUnused(live.generation.dispatchers);
      callerSources.retain([live.generation.config]);
      sources.pacers.retain([live.generation.pacing]);
    }, 50);
    timer.unref();
  }

  return {
    reload,
    recordRejected: (problems, trigger = "SIGHUP") => rejected(trigger, problems),
    lastReload: () => lastReload,
    stop() {
      closing = true;
    },
  };
}
