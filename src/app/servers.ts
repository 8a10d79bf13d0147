/** The proxy listener(s), one per listen address, and the admin listener. */
import { type AdminListener, createAdminListener } from "../admin/admin-listener.js";
import type { LastReload } from "../admin/status-report.js";
import type { CaSummary } from "../config/intercept-ca.js";
import type { ListenSpec, ProxyConfig } from "../config/proxy-config.js";
import type { ListenerRole } from "../errors.js";
import type { Lifecycle } from "../lifecycle.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { Tracing } from "../observability/tracing.js";
import type { InterceptCertificates } from "../proxy/intercept-entry.js";
import { createProxyServer, type ProxyServer } from "../proxy/proxy-server.js";
import { groupUpstreamsByListener } from "../proxy/routing/router.js";
import { VERSION } from "../version.js";
import type { CallerSources } from "./caller-sources.js";
import type { Generation, LiveGeneration } from "./generation.js";
import type { TokenSources } from "./token-sources.js";

interface ServerDeps {
  lifecycle: Lifecycle;
  metrics: Metrics;
  logger: Logger;
  tracing?: Tracing | undefined;
  /** The interception CA, when `intercept` is configured (CONNECT termination). */
  intercept?: InterceptCertificates | undefined;
}

export interface ProxyServers {
  servers: ProxyServer[];
  /** Which listener each server is and its address (same order), for a bind error that says how to move it. */
  listeners: { role: ListenerRole; listen: ListenSpec }[];
  /**
   * Route every listener by `next` (the listeners themselves stay: changing them needs a
   * restart); a listener `next` gives no upstreams answers 404.
   */
  route(next: Generation): void;
  /** Requests still running on replaced routings, over all listeners. */
  retiredInFlight(): number;
}

const listenerKey = (listen: ListenSpec) => `${listen.host}:${listen.port}`;

export function buildProxyServers(
  config: ProxyConfig,
  first: Generation,
  deps: ServerDeps,
): ProxyServers {
  const groups = groupUpstreamsByListener(config).filter(
    (group) => group.upstreams.length > 0 || group.main,
  );
  const servers = groups.map((group) =>
    createProxyServer({
      config,
      listen: group.listen,
      ...first.routingFor(group.upstreams),
      metrics: deps.metrics,
      logger: deps.logger,
      lifecycle: deps.lifecycle,
      tracing: deps.tracing,
      intercept: config.intercept === undefined ? undefined : deps.intercept,
    }),
  );
  const listeners = groups.map((group) => {
    const upstreams = group.upstreams.map((u) => ({
      name: u.name,
      index: config.upstreams.indexOf(u),
    }));
    const role: ListenerRole = group.main ? { kind: "proxy" } : { kind: "upstream", upstreams };
    return { role, listen: group.listen };
  });
  return {
    servers,
    listeners,
    route(next) {
      const nextGroups = new Map(
        groupUpstreamsByListener(next.config).map((group) => [
          listenerKey(group.listen),
          group.upstreams,
        ]),
      );
      groups.forEach((group, index) => {
        const upstreams = nextGroups.get(listenerKey(group.listen)) ?? [];
        servers[index]!.replaceRouting(next.routingFor(upstreams), next.config);
      });
    },
    retiredInFlight: () => servers.reduce((sum, proxy) => sum + proxy.retiredInFlight(), 0),
  };
}

export function buildAdminServer(
  config: ProxyConfig,
  live: LiveGeneration,
  deps: ServerDeps & {
    sources: TokenSources;
    callerSources: CallerSources;
    lastReload: () => LastReload | undefined;
    interceptCa: () => CaSummary | undefined;
    onQuit: (() => void) | undefined;
  },
): AdminListener {
  const { sharedCache } = deps.sources;
  return createAdminListener({
    config,
    upstreamNames: config.upstreams.map((u) => u.name),
    upstreams: config.upstreams,
    currentUpstreams: () => live.generation.config.upstreams,
    tokenStatus: (name: string) => live.generation.tokens.forUpstream(name).status(),
    tokenMode: (name: string) => live.generation.tokens.modeOf(name),
    lastReload: deps.lastReload,
    callerDenials: () => deps.callerSources.denials.recent(),
    callersStatus: () => deps.callerSources.status(),
    rateLimitStatus: (name: string) => live.generation.pacing.statusOf(name),
    currentReadiness: () => live.generation.config.readiness,
    interceptCa: deps.interceptCa,
    currentLimits: () => live.generation.config.limits,
    lifecycle: deps.lifecycle,
    metrics: deps.metrics,
    logger: deps.logger,
    onQuit: deps.onQuit ?? (() => {}),
    ...(sharedCache ? { sharedCacheState: () => sharedCache.state() } : {}),
    startedAtWallMs: Date.now(),
    version: VERSION,
  });
}
