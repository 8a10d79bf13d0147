/**
 * One upstream as the request pipeline sees it, built once per routing generation (a reload
 * builds new ones): its config, the builder of its forwarded header list, the one writer of its
 * credential, its dispatchers, its pacing, and where its token comes from. Every stage and the
 * exchange read what they need from here; nothing is looked up by name per request but the
 * token source (the registry may evict an idle one and make it again).
 */
import type { Dispatcher } from "undici";
import type { UpstreamConfig } from "../../config/proxy-config.js";
import type { UpstreamPacing } from "../../pacing/upstream-pacing.js";
import type { TokenProvider } from "../../token/token-provider.js";
import { CredentialWriter } from "../credential.js";
import { QueueDeadlines } from "../exchange/queue-deadlines.js";
import { createHeaderInjector, type HeaderInjector } from "./forwarded-headers.js";

export interface RouteSources {
  /** Called per request (a cheap lookup): the registry may evict idle sources. */
  tokenFor(upstreamName: string): TokenProvider;
  dispatcherFor(upstreamName: string): Dispatcher;
  /** Keeps no idle connections: the one retry after a reset goes through it. Default: dispatcherFor. */
  freshDispatcherFor?: ((upstreamName: string) => Dispatcher) | undefined;
  /** HTTP/1.1 for Upgrade requests (differs when the upstream speaks HTTP/2). Default: dispatcherFor. */
  upgradeDispatcherFor?: ((upstreamName: string) => Dispatcher) | undefined;
  /** The upstream's pacing gate and retry policy; undefined: neither. */
  pacingFor?: ((upstreamName: string) => UpstreamPacing | undefined) | undefined;
}

export interface RouteOptions {
  /**
   * Tracing is on: the client's `traceparent`/`tracestate` are left out of the forwarded list
   * (each attempt writes its own).
   */
  dropTraceContext?: boolean | undefined;
}

export class Route {
  readonly name: string;
  readonly headers: HeaderInjector;
  readonly credential: CredentialWriter;
  readonly dispatcher: Dispatcher;
  readonly freshDispatcher: Dispatcher;
  readonly upgradeDispatcher: Dispatcher;
  readonly pacing: UpstreamPacing | undefined;
  /** Its requests waiting in the pool's queue, held to `timeouts.queue` (exchange.ts). */
  readonly queueDeadlines: QueueDeadlines;
  private readonly tokenFor: (upstreamName: string) => TokenProvider;

  constructor(
    readonly config: UpstreamConfig,
    sources: RouteSources,
    options: RouteOptions = {},
  ) {
    this.name = config.name;
    this.headers = createHeaderInjector(config, options);
    this.credential = new CredentialWriter(config);
    this.dispatcher = sources.dispatcherFor(config.name);
    this.freshDispatcher = sources.freshDispatcherFor?.(config.name) ?? this.dispatcher;
    this.upgradeDispatcher = sources.upgradeDispatcherFor?.(config.name) ?? this.dispatcher;
    this.pacing = sources.pacingFor?.(config.name);
    this.queueDeadlines = new QueueDeadlines(config.timeouts.queueMs);
    this.tokenFor = sources.tokenFor;
  }

  /** The upstream's token source, as the registry holds it now. */
  tokens(): TokenProvider {
    return this.tokenFor(this.name);
  }
}

/** Routes for `upstreams`, by name. */
export function buildRoutes(
  upstreams: readonly UpstreamConfig[],
  sources: RouteSources,
  options: RouteOptions = {},
): Map<string, Route> {
  const routes = new Map<string, Route>();
  for (const upstream of upstreams)
    routes.set(upstream.name, new Route(upstream, sources, options));
  return routes;
}
