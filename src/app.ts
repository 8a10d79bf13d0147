/**
 * buildApp wires the pieces and never listens on its own: token registry, one undici dispatcher
 * per upstream, the proxy listener(s), the admin listener, metrics and lifecycle. `main.ts`
 * runs it; tests build it with port 0.
 */
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import type { Dispatcher } from "undici";
import { createAdminServer } from "./admin/admin-server.js";
import type { LastReload } from "./admin/status-report.js";
import type { ListenSpec, ProxyConfig, UpstreamConfig } from "./config/types.js";
import { createLifecycle, type Lifecycle } from "./lifecycle.js";
import { createDispatcherPool, type DispatcherPool } from "./net/dispatcher-pool.js";
import type { Logger } from "./observability/logger.js";
import { createMetrics, type Metrics } from "./observability/metrics.js";
import { createProxyServer, type ProxyRouting, type ProxyServer } from "./proxy/proxy-server.js";
import { groupUpstreamsByListener } from "./proxy/router.js";
import type { ReloadTrigger } from "./reload/config-watcher.js";
import { changesNeedingRestart } from "./reload/live-changes.js";
import { systemClock } from "./token/clock.js";
import { createRedisTokenCache } from "./token/redis-token-cache.js";
import { createSharedTokenSourceFactory } from "./token/shared-token-source.js";
import { createTokenRegistry, type TokenRegistry } from "./token/token-registry.js";
import { VERSION } from "./version.js";

export interface AppDeps {
  logger: Logger;
  /** Called on POST /quitquitquit. */
  onQuit?: () => void;
  metrics?: Metrics;
}

export type ReloadOutcome =
  | { outcome: "applied" }
  | { outcome: "rejected"; problems: string[] }
  | { outcome: "restart_required"; paths: string[] };

/** One configuration's token registry and dispatchers. */
interface Generation {
  config: ProxyConfig;
  tokens: TokenRegistry;
  /** Every dispatcher this configuration uses (the others close after a reload). */
  dispatchers: Set<Dispatcher>;
  routingFor(upstreams: readonly UpstreamConfig[]): ProxyRouting;
}

function buildGeneration(
  config: ProxyConfig,
  pool: DispatcherPool,
  tokens: TokenRegistry | undefined,
): Generation {
  const dispatcherOf = new Map<string, Dispatcher>();
  const freshDispatcherOf = new Map<string, Dispatcher>();
  const upgradeDispatcherOf = new Map<string, Dispatcher>();
  const dispatchers = new Set<Dispatcher>();
  for (const upstream of config.upstreams) {
    dispatcherOf.set(upstream.name, pool.forUpstream(upstream));
    freshDispatcherOf.set(upstream.name, pool.forFreshConnection(upstream));
    upgradeDispatcherOf.set(upstream.name, pool.forUpgrade(upstream));
    dispatchers.add(dispatcherOf.get(upstream.name)!);
    dispatchers.add(freshDispatcherOf.get(upstream.name)!);
    dispatchers.add(upgradeDispatcherOf.get(upstream.name)!);
    dispatchers.add(pool.forTokenEndpoint(upstream));
  }
  const dispatcherFor = (name: string): Dispatcher => {
    const dispatcher = dispatcherOf.get(name);
    if (!dispatcher) throw new Error(`no dispatcher for upstream ${name}`);
    return dispatcher;
  };
  const generation: Generation = {
    config,
    tokens: tokens as TokenRegistry,
    dispatchers,
    routingFor: (upstreams) => ({
      upstreams,
      tokenFor: (name: string) => generation.tokens.forUpstream(name),
      dispatcherFor,
      freshDispatcherFor: (name: string) => freshDispatcherOf.get(name) ?? dispatcherFor(name),
      upgradeDispatcherFor: (name: string) => upgradeDispatcherOf.get(name) ?? dispatcherFor(name),
    }),
  };
  return generation;
}

export interface App {
  config: ProxyConfig;
  lifecycle: Lifecycle;
  metrics: Metrics;
  tokens: TokenRegistry;
  admin: FastifyInstance;
  proxies: readonly ProxyServer[];
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
 * /startup passes once every prefetched upstream the readiness policy requires has had a token
 * (a Kubernetes startup probe then lets the app container start). Lazy upstreams don't hold
 * startup back, nor does any token under `readiness.requireTokens: none` (a gateway must not
 * stay "starting" forever because one tenant's credential is broken).
 */
function watchStartup(
  config: ProxyConfig,
  tokens: TokenRegistry,
  lifecycle: Lifecycle,
): NodeJS.Timeout | undefined {
  const waitingFor =
    config.readiness.requireTokens === "none"
      ? []
      : config.upstreams
          .filter((u) => tokens.modeOf(u.name).mode === "prefetch")
          .map((u) => u.name);
  const check = (): boolean => {
    const statuses = tokens.statuses();
    const pending = waitingFor.filter((name) => {
      const state = statuses.get(name)?.state;
      return state !== "valid" && state !== "degraded";
    });
    if (pending.length > 0) return false;
    lifecycle.markStarted();
    return true;
  };
  if (check()) return undefined;
  const timer = setInterval(() => {
    if (check()) clearInterval(timer);
  }, 50);
  timer.unref();
  return timer;
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

  // One pool for the app's life: a reload gets the dispatchers of unchanged settings back.
  const pool = createDispatcherPool(config);
  const sharedCache = config.tokenCache.redis
    ? createRedisTokenCache({ config: config.tokenCache.redis, logger, metrics })
    : undefined;
  const buildTokens = (next: ProxyConfig, adoptFrom?: TokenRegistry): TokenRegistry =>
    createTokenRegistry({
      upstreams: next.upstreams,
      maxSources: next.tokenCache.maxSources,
      eagerLimit: next.tokenCache.eagerLimit,
      // The token endpoint may be another host with its own TLS settings (UpstreamConfig.token.tls).
      dispatcherFor: (upstream: UpstreamConfig) => pool.forTokenEndpoint(upstream),
      clock: systemClock,
      logger,
      metrics,
      ...(sharedCache ? { createSource: createSharedTokenSourceFactory(sharedCache) } : {}),
      adoptFrom,
    });

  // Built now, not on first use: an unreadable CA or key file fails the start, not a request.
  let current = buildGeneration(config, pool, buildTokens(config));

  const listenerKey = (listen: ListenSpec) => `${listen.host}:${listen.port}`;
  const groups = groupUpstreamsByListener(config).filter(
    (group) => group.upstreams.length > 0 || group.main,
  );
  const proxies = groups.map((group) =>
    createProxyServer({
      config,
      listen: group.listen,
      ...current.routingFor(group.upstreams),
      metrics,
      logger,
      lifecycle,
    }),
  );

  let lastReload: LastReload | undefined;
  const admin = createAdminServer({
    config,
    upstreamNames: config.upstreams.map((u) => u.name),
    upstreams: config.upstreams,
    currentUpstreams: () => current.config.upstreams,
    tokenStatus: (name: string) => current.tokens.forUpstream(name).status(),
    tokenMode: (name: string) => current.tokens.modeOf(name),
    lastReload: () => lastReload,
    currentReadiness: () => current.config.readiness,
    lifecycle,
    metrics,
    logger,
    onQuit: deps.onQuit ?? (() => {}),
    ...(sharedCache ? { sharedCacheState: () => sharedCache.state() } : {}),
    startedAtWallMs: Date.now(),
    version: VERSION,
  });

  const record = (
    trigger: ReloadTrigger,
    outcome: ReloadOutcome,
    detail: Pick<LastReload, "problems" | "restartRequired"> = {},
  ): ReloadOutcome => {
    metrics.configReloadsTotal.inc({ outcome: outcome.outcome });
    lastReload = { at: new Date().toISOString(), trigger, outcome: outcome.outcome, ...detail };
    return outcome;
  };

  let closing = false;
  /**
   * Once no request runs on a replaced routing any more (or `shutdown.timeout` passed), the old
   * registry closes its sources that did not move (removed credentials) and the dispatchers no
   * upstream uses any more close (undici lets their last requests finish).
   */
  function retire(old: Generation): void {
    const deadline = performance.now() + current.config.shutdown.timeoutMs;
    const timer = setInterval(() => {
      const running = proxies.reduce((sum, proxy) => sum + proxy.retiredInFlight(), 0);
      if (running > 0 && performance.now() < deadline && !closing) return;
      clearInterval(timer);
      if (closing) return;
      old.tokens.close();
      void pool.closeUnused(current.dispatchers);
    }, 50);
    timer.unref();
  }

  function reload(next: ProxyConfig, trigger: ReloadTrigger = "SIGHUP"): ReloadOutcome {
    if (closing) {
      const problems = ["the proxy is shutting down"];
      return record(trigger, { outcome: "rejected", problems }, { problems });
    }
    const restartRequired = changesNeedingRestart(current.config, next);
    if (restartRequired.length > 0) {
      return record(
        trigger,
        { outcome: "restart_required", paths: restartRequired },
        { restartRequired },
      );
    }
    let built: Generation;
    try {
      // Dispatchers first: an unreadable CA or key file rejects the reload before anything moved.
      built = buildGeneration(next, pool, undefined);
    } catch (error) {
      const problems = [error instanceof Error ? error.message : String(error)];
      return record(trigger, { outcome: "rejected", problems }, { problems });
    }
    const old = current;
    built.tokens = buildTokens(next, old.tokens);
    const nextGroups = new Map(
      groupUpstreamsByListener(next).map((group) => [listenerKey(group.listen), group.upstreams]),
    );
    groups.forEach((group, index) => {
      const upstreams = nextGroups.get(listenerKey(group.listen)) ?? [];
      proxies[index]!.replaceRouting(built.routingFor(upstreams), next.limits);
    });
    current = built;
    // A removed upstream's expiry series would otherwise stay at its last value.
    const kept = new Set(next.upstreams.map((u) => u.name));
    for (const upstream of old.config.upstreams) {
      if (!kept.has(upstream.name))
        metrics.tokenExpiryTimestampSeconds.remove({ upstream: upstream.name });
    }
    logger.level = next.log.level;
    // Added credentials prefetch as at start; adopted ones keep their schedule (start is a no-op).
    current.tokens.startEager();
    retire(old);
    return record(trigger, { outcome: "applied" });
  }

  let startupWatch: NodeJS.Timeout | undefined;
  async function close(timeoutMs = current.config.shutdown.timeoutMs): Promise<void> {
    closing = true;
    if (startupWatch) clearInterval(startupWatch);
    lifecycle.markDraining();
    // Each step runs even if an earlier one failed, so no timer, socket or pool is left open.
    const results = await Promise.allSettled(proxies.map((proxy) => proxy.close(timeoutMs)));
    results.push(...(await Promise.allSettled([admin.close()])));
    current.tokens.close();
    results.push(...(await Promise.allSettled([sharedCache?.close(), pool.close()])));
    lifecycle.markStopped();
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
  }

  return {
    get config() {
      return current.config;
    },
    lifecycle,
    metrics,
    get tokens() {
      return current.tokens;
    },
    admin,
    proxies,
    reload: async (next, trigger) => reload(next, trigger),
    recordRejected: (problems, trigger = "SIGHUP") =>
      record(trigger, { outcome: "rejected", problems }, { problems }),
    async listen() {
      try {
        const proxyAddresses: AddressInfo[] = [];
        for (const proxy of proxies) proxyAddresses.push(await proxy.listen());
        await admin.listen({ host: config.admin.host, port: config.admin.port });
        const adminAddress = admin.server.address() as AddressInfo;
        lifecycle.markRunning();
        current.tokens.startEager();
        startupWatch = watchStartup(config, current.tokens, lifecycle);
        return { proxy: proxyAddresses, admin: adminAddress };
      } catch (error) {
        // One port taken must not leave the others bound (and the process alive) behind it.
        await close(0).catch(() => {});
        throw error;
      }
    },
    close,
  };
}
