/**
 * Route: which upstream serves the request (routing/route-table.ts: host, then the longest path
 * prefix), and what goes to it — the path sent upstream, the forwarded header list with its
 * credential slots, and for a plain request how its body travels (refused here, before a byte
 * of it is read, when its declared length is over the limit).
 */
import type { LimitsConfig } from "../../config/proxy-config.js";
import type { ProxiedRequest } from "../proxied-request.js";
import { planBody } from "../request-body.js";
import type { Route } from "../routing/route.js";
import type { RouteTable } from "../routing/route-table.js";
import { upstreamPath } from "../routing/router.js";
import type { Flow, Stage } from "./pipeline.js";

/**
 * Said by a way in before a routed request is counted for its upstream: false when it answered
 * (or handed on) the request itself.
 */
export type RouteCheck = (request: ProxiedRequest, route: Route) => boolean;

export class RouteStage implements Stage {
  readonly name = "route";

  constructor(
    private readonly limits: LimitsConfig,
    private readonly routes: RouteTable,
    private readonly beforeRouted?: RouteCheck,
  ) {}

  run(request: ProxiedRequest, flow: Flow): void {
    const target = request.target!;
    const { tunnel } = request;
    if (tunnel !== undefined) {
      this.routeTunneled(request, flow);
      return;
    }
    const route = this.routes.route(target.authority, target.pathname);
    if (route === undefined) {
      request.fail(
        "no_route",
        `no upstream matches this request; configured routes: ${this.routes.routesDescription}`,
      );
      return;
    }
    this.forward(request, route, flow);
  }

  /**
   * A request inside a terminated CONNECT goes to the upstream its CONNECT named, whatever its
   * Host or path (an intercepted host is that upstream's alone), as that CONNECT's caller. A
   * reload that stopped intercepting the authority leaves the tunnel with nowhere to go.
   */
  private routeTunneled(request: ProxiedRequest, flow: Flow): void {
    const tunnel = request.tunnel!;
    request.caller = tunnel.caller;
    const route = this.routes.interceptRoute(tunnel.authority);
    if (route === undefined) {
      request.fail(
        "host_not_allowed",
        `${tunnel.authority} is no longer intercepted by this proxy (the configuration changed since the CONNECT)`,
        { close: true },
      );
      return;
    }
    this.forward(request, route, flow);
  }

  private forward(request: ProxiedRequest, route: Route, flow: Flow): void {
    const target = request.target!;
    if (this.beforeRouted !== undefined && !this.beforeRouted(request, route)) return;
    request.markRouted(route);
    const upstream = route.config;
    const forwarded = route.headers.build(request.req.rawHeaders, {
      // A getpeername() call: only when X-Forwarded-For will carry it.
      remoteAddress: upstream.forwardedHeaders ? request.req.socket.remoteAddress : undefined,
      authority: target.authority,
      proto: request.tunnel === undefined ? "http" : "https",
    });
    if (forwarded.kind === "reject") {
      request.fail("bad_request", forwarded.message);
      return;
    }
    request.headers = forwarded.headers;
    request.slots = forwarded;
    request.upstreamPath = upstreamPath(upstream, target.pathAndQuery);
    if (request.kind === "request" && !this.planBody(request, route)) return;
    flow.next(request);
  }

  /** Plans a plain request's body; false when it is refused for its declared size. */
  private planBody(request: ProxiedRequest, route: Route): boolean {
    const upstream = route.config;
    const body = planBody(request.req, upstream.replayBodyLimitBytes);
    const maxBodyBytes = upstream.maxRequestBodySizeBytes ?? this.limits.maxRequestBodySizeBytes;
    request.bodyPlan = body;
    request.maxBodyBytes = maxBodyBytes;
    if (maxBodyBytes > 0 && body.kind !== "none" && (body.length ?? 0) > maxBodyBytes) {
      // Refused before a byte of it is read; the connection closes rather than drain it.
      request.fail(
        "payload_too_large",
        `request body of ${body.length} bytes is over the limit of ${maxBodyBytes} bytes`,
        { close: true },
      );
      return false;
    }
    return true;
  }
}
