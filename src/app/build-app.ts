/**
 * buildApp wires the pieces and never listens on its own: token registry, one undici dispatcher
 * per upstream, the proxy listener(s), the admin listener, metrics and lifecycle. `main.ts`
 * runs it; tests build it with port 0. Each step lives beside it in `app/`.
 */
import type { AddressInfo } from "node:net";
import type { AdminListener } from "../admin/admin-listener.js";
import type { ProxyConfig } from "../config/proxy-config.js";
import { createLifecycle, type Lifecycle } from "../lifecycle.js";
import type { Logger } from "../observability/logger.js";
import { createMetrics, type Metrics } from "../observability/metrics.js";
import type { Tracing } from "../observability/tracing.js";
import type { ProxyServer } from "../proxy/proxy-server.js";
import type { ReloadTrigger } from "../reload/config-watcher.js";
import type { ReloadOutcome } from "../reload/reload-on-change.js";
import type { TokenRegistry } from "../token/token-registry.js";
import { buildCallerSources } from "./caller-sources.js";
import { buildGeneration, type LiveGeneration } from "./generation.js";
import { buildInterceptSource, type InterceptSource } from "./intercept.js";
import { createReloader } from "./reloader.js";
import { createRunControl } from "./run-control.js";
import { buildAdminServer, buildProxyServers } from "./servers.js";
import { buildTokenSources } from "./token-sources.js";

export interface AppDeps {
  logger: Logger;
  /** Called on POST /quitquitquit. */
  onQuit?: () => void;
  metrics?: Metrics;
  /** Spans per request (createTracing at start); default: off. */
  tracing?: Tracing;
  /**
   * Monotonic ms of the caller failure throttle (its windows and blocks, and when connections
   * proved their credentials); default performance.now.
   */
  throttleClock?: () => number;
}

export interface App {
  config: ProxyConfig;
  lifecycle: Lifecycle;
  metrics: Metrics;
  tokens: TokenRegistry;
  /** The admin listener: probes and /metrics itself, the rest by fastify built on first use. */
  admin: AdminListener;
  proxies: readonly ProxyServer[];
  /** The interception CA and its leaf certificates (`intercept`); loaded by `listen()`. */
  intercept: InterceptSource;
  /**
   * Apply a new, already validated configuration (config reload): `applied`, or
   * `restart_required` with the changed paths that can't apply live (nothing is then applied),
   * or `rejected` when a file it references can't be used. Counted and shown on /status.
   */
  reload(next: ProxyConfig, trigger?: ReloadTrigger): Promise<ReloadOutcome>;
  /** Record a reload whose configuration did not validate (the running one stays). */
  recordRejected(problems: string[], trigger?: ReloadTrigger): ReloadOutcome;
  /** Bind every listener; resolves with the bound addresses (port 0 picks free ports). */
  listen(): Promise<{ proxy: AddressInfo[]; admin: AddressInfo }>;
  /** Close listeners (in-flight requests get up to `timeoutMs`), then timers and pools. */
  close(timeoutMs?: number): Promise<void>;
}

/**
 * Wire an app from a loaded config: dispatchers, token registry (Redis-shared when
 * `tokenCache.redis` is set), proxy listener(s) and the admin server. Nothing listens until
 * `listen()`; `close()` releases everything.
 */
export function buildApp(config: ProxyConfig, deps: AppDeps): App {
  const { logger } = deps;
  const metrics = deps.metrics ?? createMetrics();
  const lifecycle = createLifecycle();
  metrics.watchWaiting(() => lifecycle.waiting.waiting);
  const sources = buildTokenSources(config, { logger, metrics, tracing: deps.tracing });
  const callerSources = buildCallerSources({ logger, metrics, now: deps.throttleClock });
  const intercept = buildInterceptSource(config, { logger, metrics });
  // Built now, not on first use: an unreadable CA or key file fails the start, not a request.
  const live: LiveGeneration = { generation: buildGeneration(config, sources, callerSources) };
  const proxies = buildProxyServers(config, live.generation, {
    lifecycle,
    metrics,
    logger,
    tracing: deps.tracing,
    intercept,
  });
  const reloader = createReloader({ live, sources, callerSources, proxies, metrics, logger });
  const admin = buildAdminServer(config, live, {
    sources,
    callerSources,
    lastReload: reloader.lastReload,
    interceptCa: intercept.ca,
    onQuit: deps.onQuit,
    lifecycle,
    metrics,
    logger,
  });
  const { listen, close } = createRunControl({
    config,
    live,
    sources,
    callerSources,
    intercept,
    proxies,
    admin,
    reloader,
    lifecycle,
  });

  return {
    get config() {
      return live.generation.config;
    },
    lifecycle,
    metrics,
    get tokens() {
      return live.generation.tokens;
    },
    admin,
    proxies: proxies.servers,
    intercept,
    reload: (next, trigger) => reloader.reload(next, trigger),
    recordRejected: reloader.recordRejected,
    listen,
    close,
  };
}
