/**
 * Guard: the checks Node's parser leaves to us (request-guards.ts: version, Host, header count,
 * target length and form, methods a credential-injecting proxy refuses, dot-segments), the path
 * normalized once (`paths`: what is routed, authorized, paced, logged and forwarded), and for a
 * plain request its expectation. A request this malformed says nothing good about the rest of
 * the connection's bytes: its answer closes the connection.
 */
import type { LimitsConfig, PathsConfig } from "../../config/proxy-config.js";
import type { ProxiedRequest } from "../proxied-request.js";
import { checkRequest } from "../request-guards.js";
import type { RouteTable } from "../routing/route-table.js";
import type { Flow, Stage } from "./pipeline.js";

/** RFC 9110 §10.1.1: the only expectation defined. */
const CONTINUE = /^100-continue$/i;

export class GuardStage implements Stage {
  readonly name = "guard";
  private readonly isKnownHost: (authority: string) => boolean;

  constructor(
    private readonly limits: LimitsConfig,
    private readonly paths: PathsConfig,
    routes: RouteTable,
  ) {
    this.isKnownHost = (authority) => routes.isKnownHost(authority);
  }

  run(request: ProxiedRequest, flow: Flow): void {
    const guard = checkRequest(request.req, this.limits, this.paths, this.isKnownHost);
    if (guard.kind === "reject") {
      request.fail(guard.code, guard.message, { headers: guard.headers, close: true });
      return;
    }
    request.target = guard;
    request.pathname = guard.pathname;
    const expectation = request.req.headers.expect;
    if (request.kind === "request" && expectation !== undefined && !CONTINUE.test(expectation)) {
      // Node answers a bare 417 itself unless 'checkExpectation' is handled (proxy-server.ts).
      request.fail("expectation_failed", "only Expect: 100-continue is supported");
      return;
    }
    flow.next(request);
  }
}
