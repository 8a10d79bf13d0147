/**
 * A generation is everything one configuration routes by: its token registry, its dispatchers and
 * the routing handed to the proxy listeners. `buildGeneration` is the one place that builds it;
 * the reloader (reloader.ts) is the one place that swaps it.
 */
import type { Dispatcher } from "undici";
import type { CallerGate } from "../callers/caller-gate.js";
import type { ProxyConfig, UpstreamConfig } from "../config/proxy-config.js";
import type { DispatcherPool } from "../net/dispatcher-pool.js";
import type { PacingTable } from "../pacing/pacers.js";
import type { ProxyRouting } from "../proxy/proxy-server.js";
import type { TokenRegistry } from "../token/token-registry.js";
import type { CallerSources } from "./caller-sources.js";
import type { TokenSources } from "./token-sources.js";

/** One configuration's token registry and dispatchers. */
export interface Generation {
  config: ProxyConfig;
  tokens: TokenRegistry;
  /** Every dispatcher this configuration uses (the others close after a reload). */
  dispatchers: Set<Dispatcher>;
  /** Who may use which upstream (`allow`, `callers`); `ready()` once its authenticator loaded. */
  callers: CallerGate;
  /** Each upstream's pacer, retry policy and budget (issue 26). */
  pacing: PacingTable;
  routingFor(upstreams: readonly UpstreamConfig[]): ProxyRouting;
}

/** The generation requests are routed by now; only the reloader replaces it. */
export interface LiveGeneration {
  generation: Generation;
}

/**
 * Build `config`'s generation. Dispatchers first: an unreadable CA or key file throws before any
 * token source is handed over from `adoptFrom` (the running generation's registry on reload).
 */
export function buildGeneration(
  config: ProxyConfig,
  sources: TokenSources,
  callerSources: CallerSources,
  adoptFrom?: TokenRegistry,
): Generation {
  const routes = buildDispatchers(config, sources.pool);
  const callers = callerSources.gateFor(config);
  const tokens = sources.tokensFor(config, adoptFrom);
  const pacing = sources.pacers.tableFor(config);
  return {
    config,
    tokens,
    dispatchers: routes.dispatchers,
    callers,
    pacing,
    routingFor: (upstreams) => ({
      upstreams,
      callerGate: callers,
      tokenFor: (name: string) => tokens.forUpstream(name),
      dispatcherFor: routes.dispatcherFor,
      freshDispatcherFor: routes.freshDispatcherFor,
      upgradeDispatcherFor: routes.upgradeDispatcherFor,
      pacingFor: pacing.pacingFor,
    }),
  };
}

function buildDispatchers(config: ProxyConfig, pool: DispatcherPool) {
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
  return {
    dispatchers,
    dispatcherFor,
    freshDispatcherFor: (name: string) => freshDispatcherOf.get(name) ?? dispatcherFor(name),
    upgradeDispatcherFor: (name: string) => upgradeDispatcherOf.get(name) ?? dispatcherFor(name),
  };
}
