/**
 * The route stage (src/proxy/pipeline/route-stage.ts): the route table picks the upstream by
 * host and longest path prefix (404 `no_route` naming the configured routes when none does);
 * a way in's `beforeRouted` check may keep the request for itself; the request is counted for
 * its upstream, gets its forwarded header list with the credential slots (a refused client
 * header answers 400) and the path sent upstream; a plain request's body is planned — buffered
 * up to `replayBodyLimit`, streamed beyond or when chunked — and refused 413 before a byte is
 * read when its declared length is over the upstream's (or the global) limit.
 */
import { describe, expect, it } from "vitest";
import type { UpstreamConfig } from "../../../src/config/proxy-config.js";
import { type RouteCheck, RouteStage } from "../../../src/proxy/pipeline/route-stage.js";
import type { AcceptedTarget } from "../../../src/proxy/request-guards.js";
import { RouteTable } from "../../../src/proxy/routing/route-table.js";
import { makeProxyConfig, makeUpstreamConfig } from "../../helpers/upstream-config.js";
import {
  type ClientRequestOptions,
  errorBody,
  makeRoute,
  RecordingFlow,
  TestRequest,
} from "../support/pipeline-fakes.js";

const limits = { ...makeProxyConfig([]).limits, maxRequestBodySizeBytes: 10_000 };

const api = makeUpstreamConfig("api", {
  baseUrl: "https://api.example.test/base",
  match: { pathPrefix: "/api" },
  stripPrefix: true,
  replayBodyLimit: "1KiB",
  forwardedHeaders: true,
});
const strict = makeUpstreamConfig("strict", {
  match: { pathPrefix: "/strict" },
  clientCredentials: "reject",
  maxRequestBodySize: "100B",
});
const hosted = makeUpstreamConfig("hosted", { match: { hosts: ["hosted.internal"] } });

function table(...upstreams: UpstreamConfig[]): RouteTable {
  return new RouteTable(upstreams.map((u) => makeRoute(u)));
}

const routes = table(api, strict, hosted);

/** A request past the guard: its target as the guard stage leaves it. */
function guarded(options: ClientRequestOptions & { kind?: "request" | "upgrade" } = {}) {
  const test = new TestRequest(options);
  const url = options.url ?? "/";
  const q = url.indexOf("?");
  const target: AcceptedTarget = {
    kind: "ok",
    authority: test.req.headers.host,
    pathAndQuery: url,
    pathname: q === -1 ? url : url.slice(0, q),
    absoluteForm: false,
  };
  test.request.target = target;
  test.request.pathname = target.pathname;
  return test;
}

function run(test: TestRequest, beforeRouted?: RouteCheck, routeTable = routes) {
  const flow = new RecordingFlow();
  new RouteStage(limits, routeTable, beforeRouted).run(test.request, flow);
  return flow;
}

describe("RouteStage", () => {
  it("is named route", () => {
    expect(new RouteStage(limits, routes).name).toBe("route");
  });

  it("answers 404 no_route, naming the configured routes, when nothing matches", () => {
    const test = guarded({ url: "/nowhere" });
    const flow = run(test);
    expect(flow.passed).toEqual([]);
    const answer = test.answer();
    expect(answer.status).toBe(404);
    expect(errorBody(answer).code).toBe("no_route");
    expect(errorBody(answer).message).toContain(
      "configured routes: /api; /strict; / (hosts hosted.internal",
    );
    expect(test.ctx.inFlight).toEqual([]);
    expect(test.record()).toMatchObject({ upstream: "none", routed: false });
  });

  it("routes by host first, then by path prefix", () => {
    const byHost = guarded({ url: "/api/x", rawHeaders: ["Host", "hosted.internal"] });
    run(byHost);
    expect(byHost.request.upstreamName).toBe("hosted");

    const byPath = guarded({ url: "/api/x" });
    run(byPath);
    expect(byPath.request.upstreamName).toBe("api");
  });

  it("counts the request for its upstream and fills what the exchange needs", () => {
    const test = guarded({
      url: "/api/v1/items?page=2",
      rawHeaders: ["Host", "svc.local", "Accept", "application/json", "Authorization", "Basic x"],
    });
    const flow = run(test);
    const { request } = test;
    expect(flow.passed).toEqual([request]);
    expect(request.routed).toBe(true);
    expect(request.route?.name).toBe("api");
    expect(test.ctx.inFlight).toEqual(["api"]);
    // stripPrefix and the base path: what the upstream is asked for.
    expect(request.upstreamPath).toBe("/base/v1/items?page=2");
    // The client's credential is gone; the slot waits for the exchange's.
    expect(request.headers).not.toContain("Basic x");
    expect(request.headers[request.slots.authorizationIndex - 1]).toBe("authorization");
    expect(request.slots.dpopIndex).toBe(-1);
    expect(request.headers).toContain("application/json");
    // forwardedHeaders: the peer's address is read for X-Forwarded-For.
    const xff = request.headers.indexOf("x-forwarded-for");
    expect(request.headers[xff + 1]).toBe("10.0.0.9");
    expect(test.answers()).toEqual([]);
  });

  it("lets the way in keep a request before it is counted (beforeRouted false)", () => {
    const seen: string[] = [];
    const keep: RouteCheck = (request, route) => {
      seen.push(route.name);
      request.fail("upgrade_not_allowed", "no");
      return false;
    };
    const test = guarded({ url: "/api/ws", kind: "upgrade" });
    const flow = run(test, keep);
    expect(seen).toEqual(["api"]);
    expect(flow.passed).toEqual([]);
    expect(test.ctx.inFlight).toEqual([]);
    expect(test.request.routed).toBe(false);

    const pass = guarded({ url: "/api/ws", kind: "upgrade" });
    expect(run(pass, () => true).passed).toEqual([pass.request]);
    expect(pass.ctx.inFlight).toEqual(["api"]);
  });

  it("answers 400 when the upstream refuses a header the client sent", () => {
    const test = guarded({
      url: "/strict/x",
      rawHeaders: ["Host", "a", "Authorization", "Bearer mine"],
    });
    const flow = run(test);
    expect(flow.passed).toEqual([]);
    expect(test.answer().status).toBe(400);
    expect(errorBody(test.answer()).message).toContain("authorization");
    // Routed before the refusal: it counts for its upstream.
    expect(test.record()).toMatchObject({ upstream: "strict", routed: true });
  });

  it("plans a plain request's body: none, buffered within replayBodyLimit, streamed beyond or chunked", () => {
    const none = guarded({ url: "/api/x" });
    run(none);
    expect(none.request.bodyPlan).toEqual({ kind: "none" });

    const small = guarded({
      method: "POST",
      url: "/api/x",
      rawHeaders: ["Host", "a", "Content-Length", "1024"],
    });
    run(small);
    expect(small.request.bodyPlan).toEqual({ kind: "buffer", length: 1024 });
    expect(small.request.maxBodyBytes).toBe(10_000);

    const large = guarded({
      method: "POST",
      url: "/api/x",
      rawHeaders: ["Host", "a", "Content-Length", "1025"],
    });
    run(large);
    expect(large.request.bodyPlan).toEqual({ kind: "stream", length: 1025 });

    const chunked = guarded({
      method: "POST",
      url: "/api/x",
      rawHeaders: ["Host", "a", "Transfer-Encoding", "chunked"],
    });
    run(chunked);
    expect(chunked.request.bodyPlan).toEqual({ kind: "stream", length: undefined });
  });

  it("refuses a declared body over the limit 413 before reading it, closing the connection", () => {
    const test = guarded({
      method: "POST",
      url: "/api/x",
      rawHeaders: ["Host", "a", "Content-Length", "10001"],
    });
    const flow = run(test);
    expect(flow.passed).toEqual([]);
    const answer = test.answer();
    expect(answer.status).toBe(413);
    expect(answer.headers.get("connection")).toEqual(["close"]);
    expect(errorBody(answer).message).toContain("10001");
  });

  it("uses the upstream's own maxRequestBodySize over the global one", () => {
    const test = guarded({
      method: "PUT",
      url: "/strict/x",
      rawHeaders: ["Host", "a", "Content-Length", "101"],
    });
    run(test);
    expect(test.request.maxBodyBytes).toBe(100);
    expect(test.answer().status).toBe(413);

    const within = guarded({
      method: "PUT",
      url: "/strict/x",
      rawHeaders: ["Host", "a", "Content-Length", "100"],
    });
    expect(run(within).passed).toHaveLength(1);
  });

  it("plans no body for an upgrade", () => {
    const test = guarded({
      kind: "upgrade",
      url: "/api/ws",
      rawHeaders: ["Host", "a", "Content-Length", "99999"],
    });
    const flow = run(test);
    expect(flow.passed).toEqual([test.request]);
    expect(test.request.bodyPlan).toEqual({ kind: "none" });
  });
});
