/**
 * A listener's routes: the router's host and path-prefix rules (router.ts) answered with the
 * Route objects of one routing generation, so the pipeline gets everything about an upstream
 * from one lookup.
 */

import { interceptRoutes } from "../../base/authority.js";
import type { UpstreamConfig } from "../../config/proxy-config.js";
import type { Route } from "./route.js";
import { createRouter, type Router } from "./router.js";

export class RouteTable {
  private readonly router: Router;
  private readonly byConfig = new Map<UpstreamConfig, Route>();
  /** `intercept: true` upstreams by their baseUrl authority (the CONNECT route table). */
  private readonly byAuthority = new Map<string, Route>();

  constructor(routes: Iterable<Route>) {
    const list = [...routes];
    for (const route of list) this.byConfig.set(route.config, route);
    this.router = createRouter(list.map((route) => route.config));
    const intercepted = interceptRoutes(list.map((route) => route.config));
    for (const [authority, upstream] of intercepted) {
      this.byAuthority.set(authority, this.byConfig.get(upstream)!);
    }
  }

  /** The route of an intercepted upstream by the CONNECT's authority (`host:port`, lowercase). */
  interceptRoute(authority: string): Route | undefined {
    return this.byAuthority.get(authority);
  }

  /** The authorities CONNECT may name here, for a refusal's message. */
  get interceptedAuthorities(): string[] {
    return [...this.byAuthority.keys()];
  }

  /** The route for this authority (any case; undefined for none) and pathname. */
  route(authority: string | undefined, pathname: string): Route | undefined {
    const upstream = this.router.route(authority, pathname);
    return upstream && this.byConfig.get(upstream);
  }

  /** True if `authority` is named in some upstream's `match.hosts` of this listener. */
  isKnownHost(authority: string): boolean {
    return this.router.isKnownHost(authority);
  }

  /** A secret-free description of the configured routes, for 404 messages. */
  get routesDescription(): string {
    return this.router.routesDescription;
  }

  /** Every route of this table. */
  routes(): IterableIterator<Route> {
    return this.byConfig.values();
  }
}
