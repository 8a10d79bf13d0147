/**
 * buildApp wires the pieces and never listens on its own: token registry, one undici dispatcher
 * per upstream, the proxy listener(s), the admin listener, metrics and lifecycle. `main.ts`
 * runs it; tests build it with port 0.
 */
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import type { Dispatcher } from "undici";
import { createAdminServer } from "./admin/admin-server.js";
import type { ProxyConfig, UpstreamConfig } from "./config/types.js";
import { createLifecycle, type Lifecycle } from "./lifecycle.js";
import { createDispatcherPool } from "./net/dispatcher-pool.js";
import type { Logger } from "./observability/logger.js";
import { createMetrics, type Metrics } from "./observability/metrics.js";
import { createProxyServer, type ProxyServer } from "./proxy/proxy-server.js";
import { groupUpstreamsByListener } from "./proxy/router.js";
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

export interface App {
  config: ProxyConfig;
  lifecycle: Lifecycle;
  metrics: Metrics;
  tokens: TokenRegistry;
  admin: FastifyInstance;
  proxies: readonly ProxyServer[];
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

  // Built now, not on first use: an unreadable CA or key file fails the start, not a request.
  const pool = createDispatcherPool(config);
  const dispatcherOf = new Map<string, Dispatcher>();
  const freshDispatcherOf = new Map<string, Dispatcher>();
  const upgradeDispatcherOf = new Map<string, Dispatcher>();
  for (const upstream of config.upstreams) {
    dispatcherOf.set(upstream.name, pool.forUpstream(upstream));
    freshDispatcherOf.set(upstream.name, pool.forFreshConnection(upstream));
    upgradeDispatcherOf.set(upstream.name, pool.forUpgrade(upstream));
    pool.forTokenEndpoint(upstream);
  }
  const dispatcherFor = (name: string): Dispatcher => {
    const dispatcher = dispatcherOf.get(name);
    if (!dispatcher) throw new Error(`no dispatcher for upstream ${name}`);
    return dispatcher;
  };

  const sharedCache = config.tokenCache.redis
    ? createRedisTokenCache({ config: config.tokenCache.redis, logger, metrics })
    : undefined;
  const tokens = createTokenRegistry({
    upstreams: config.upstreams,
    maxSources: config.tokenCache.maxSources,
    eagerLimit: config.tokenCache.eagerLimit,
    // The token endpoint may be another host with its own TLS settings (UpstreamConfig.token.tls).
    dispatcherFor: (upstream: UpstreamConfig) => pool.forTokenEndpoint(upstream),
    clock: systemClock,
    logger,
    metrics,
    ...(sharedCache ? { createSource: createSharedTokenSourceFactory(sharedCache) } : {}),
  });

  const proxies = groupUpstreamsByListener(config)
    .filter((group) => group.upstreams.length > 0 || group.main)
    .map((group) =>
      createProxyServer({
        config,
        listen: group.listen,
        upstreams: group.upstreams,
        tokenFor: (name: string) => tokens.forUpstream(name),
        dispatcherFor,
        freshDispatcherFor: (name: string) => freshDispatcherOf.get(name) ?? dispatcherFor(name),
        upgradeDispatcherFor: (name: string) =>
          upgradeDispatcherOf.get(name) ?? dispatcherFor(name),
        metrics,
        logger,
        lifecycle,
      }),
    );

  const admin = createAdminServer({
    config,
    upstreamNames: config.upstreams.map((u) => u.name),
    upstreams: config.upstreams,
    tokenStatus: (name: string) => tokens.forUpstream(name).status(),
    tokenMode: (name: string) => tokens.modeOf(name),
    lifecycle,
    metrics,
    logger,
    onQuit: deps.onQuit ?? (() => {}),
    ...(sharedCache ? { sharedCacheState: () => sharedCache.state() } : {}),
    startedAtWallMs: Date.now(),
    version: VERSION,
  });

  let startupWatch: NodeJS.Timeout | undefined;
  async function close(timeoutMs = config.shutdown.timeoutMs): Promise<void> {
    if (startupWatch) clearInterval(startupWatch);
    lifecycle.markDraining();
    // Each step runs even if an earlier one failed, so no timer, socket or pool is left open.
    const results = await Promise.allSettled(proxies.map((proxy) => proxy.close(timeoutMs)));
    results.push(...(await Promise.allSettled([admin.close()])));
    tokens.close();
    results.push(...(await Promise.allSettled([sharedCache?.close(), pool.close()])));
    lifecycle.markStopped();
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
  }

  return {
    config,
    lifecycle,
    metrics,
    tokens,
    admin,
    proxies,
    async listen() {
      try {
        const proxyAddresses: AddressInfo[] = [];
        for (const proxy of proxies) proxyAddresses.push(await proxy.listen());
        await admin.listen({ host: config.admin.host, port: config.admin.port });
        const adminAddress = admin.server.address() as AddressInfo;
        lifecycle.markRunning();
        tokens.startEager();
        startupWatch = watchStartup(config, tokens, lifecycle);
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
