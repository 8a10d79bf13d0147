/**
 * Planning a request: guards → route → forwarded headers → body plan. Pure decisions from the
 * request head; nothing is read from the body and nothing is sent anywhere yet.
 */
import type { IncomingMessage } from "node:http";
import type { LimitsConfig, PathsConfig, UpstreamConfig } from "../config/types.js";
import type { ProxyErrorCode } from "../errors.js";
import {
  createHeaderInjector,
  type HeaderInjector,
  type HeaderInjectorOptions,
} from "./inject-headers.js";
import { type BodyPlan, planBody } from "./request-body.js";
import { checkRequest } from "./request-guards.js";
import { createRouter, upstreamPath } from "./router.js";

/** What's fixed per upstream, computed once. */
export interface UpstreamRoute {
  config: UpstreamConfig;
  injector: HeaderInjector;
}

/** A request to forward: where, with which headers, and how its body travels. */
export interface ForwardPlan {
  kind: "forward";
  route: UpstreamRoute;
  /** The normalized path without the query string, for logs. */
  pathname: string;
  /** Path and query as sent upstream: the normalized path, the query byte-exact. */
  path: string;
  /** Forwarded headers (flat name/value list); the Authorization slot is filled at dispatch. */
  headers: string[];
  authorizationIndex: number;
  /** Index of the DPoP proof value, or -1. */
  dpopIndex: number;
  body: BodyPlan;
  /** Largest body this request may send (0: none); chunked bodies are counted as they come. */
  maxBodyBytes: number;
}

/** A request the proxy answers itself. */
export interface RejectPlan {
  kind: "reject";
  code: ProxyErrorCode;
  message: string;
  headers?: Record<string, string> | undefined;
  /** Close the connection after the answer (the request was malformed). */
  close: boolean;
  /** Set once the request was routed (for the log and metrics). */
  route: UpstreamRoute | undefined;
  pathname: string;
}

export type RequestPlan = ForwardPlan | RejectPlan;

export interface RequestPlanner {
  plan(req: IncomingMessage): RequestPlan;
}

/** RFC 9110 §10.1.1: the only expectation defined. */
const CONTINUE = /^100-continue$/i;

export function createRequestPlanner(
  limits: LimitsConfig,
  paths: PathsConfig,
  upstreams: readonly UpstreamConfig[],
  injectorOptions: HeaderInjectorOptions = {},
): RequestPlanner {
  const router = createRouter(upstreams);
  const routes = new Map<string, UpstreamRoute>();
  for (const upstream of upstreams) {
    routes.set(upstream.name, {
      config: upstream,
      injector: createHeaderInjector(upstream, injectorOptions),
    });
  }
  const isKnownHost = (authority: string) => router.isKnownHost(authority);

  function plan(req: IncomingMessage): RequestPlan {
    const guard = checkRequest(req, limits, paths, isKnownHost);
    if (guard.kind === "reject") {
      // A request this malformed says nothing good about the rest of the connection's bytes.
      return {
        kind: "reject",
        code: guard.code,
        message: guard.message,
        headers: guard.headers,
        close: true,
        route: undefined,
        pathname: "",
      };
    }
    const expectation = req.headers.expect;
    if (expectation !== undefined && !CONTINUE.test(expectation)) {
      // Node answers a bare 417 itself unless 'checkExpectation' is handled (proxy-server.ts).
      return {
        kind: "reject",
        code: "expectation_failed",
        message: "only Expect: 100-continue is supported",
        close: false,
        route: undefined,
        pathname: guard.pathname,
      };
    }
    const upstream = router.route(guard.authority, guard.pathname);
    if (!upstream) {
      return {
        kind: "reject",
        code: "no_route",
        message: `no upstream matches this request; configured routes: ${router.routesDescription}`,
        close: false,
        route: undefined,
        pathname: guard.pathname,
      };
    }
    const route = routes.get(upstream.name)!;
    const injected = route.injector.build(req.rawHeaders, {
      // A getpeername() call: only when X-Forwarded-For will carry it.
      remoteAddress: upstream.forwardedHeaders ? req.socket.remoteAddress : undefined,
      authority: guard.authority,
    });
    if (injected.kind === "reject") {
      return {
        kind: "reject",
        code: "bad_request",
        message: injected.message,
        close: false,
        route,
        pathname: guard.pathname,
      };
    }
    const body = planBody(req, upstream.replayBodyLimitBytes);
    const maxBodyBytes = upstream.maxRequestBodySizeBytes ?? limits.maxRequestBodySizeBytes;
    if (maxBodyBytes > 0 && body.kind !== "none" && (body.length ?? 0) > maxBodyBytes) {
      // Refused before a byte of it is read; the connection closes rather than drain it.
      return {
        kind: "reject",
        code: "payload_too_large",
        message: `request body of ${body.length} bytes is over the limit of ${maxBodyBytes} bytes`,
        close: true,
        route,
        pathname: guard.pathname,
      };
    }
    return {
      kind: "forward",
      route,
      pathname: guard.pathname,
      path: upstreamPath(upstream, guard.pathAndQuery),
      headers: injected.headers,
      authorizationIndex: injected.authorizationIndex,
      dpopIndex: injected.dpopIndex,
      body,
      maxBodyBytes,
    };
  }

  return { plan };
}
