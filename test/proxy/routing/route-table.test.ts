/**
 * A listener's route table (src/proxy/routing/route-table.ts): the router's host and longest
 * path-prefix rules answered with the Route objects of its generation, so one lookup gives the
 * pipeline everything about the upstream; which hosts it serves; a secret-free description of
 * its routes for 404 messages.
 */
import { describe, expect, it } from "vitest";
import { RouteTable } from "../../../src/proxy/routing/route-table.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { makeRoute } from "../support/pipeline-fakes.js";

const root = makeRoute(makeUpstreamConfig("root"));
const api = makeRoute(makeUpstreamConfig("api", { match: { pathPrefix: "/api" } }));
const apiV2 = makeRoute(makeUpstreamConfig("api-v2", { match: { pathPrefix: "/api/v2" } }));
const hosted = makeRoute(
  makeUpstreamConfig("hosted", {
    match: { hosts: ["files.internal"] },
    clientSecret: "do-not-show-me",
  }),
);
const table = new RouteTable([root, api, apiV2, hosted]);

describe("RouteTable", () => {
  it("answers with the Route object itself: longest prefix, host rules first", () => {
    expect(table.route("svc.local", "/api/v2/x")).toBe(apiV2);
    expect(table.route("svc.local", "/api/v1/x")).toBe(api);
    expect(table.route("svc.local", "/other")).toBe(root);
    expect(table.route("FILES.internal", "/api/x")).toBe(hosted);
    expect(table.route(undefined, "/api")).toBe(api);
  });

  it("answers undefined when nothing matches", () => {
    const narrow = new RouteTable([api]);
    expect(narrow.route("svc.local", "/elsewhere")).toBeUndefined();
  });

  it("knows the hosts its upstreams name", () => {
    expect(table.isKnownHost("files.internal")).toBe(true);
    expect(table.isKnownHost("elsewhere.example")).toBe(false);
  });

  it("describes its routes without secrets", () => {
    expect(table.routesDescription).toContain("/api/v2");
    expect(table.routesDescription).toContain("files.internal");
    expect(table.routesDescription).not.toContain("do-not-show-me");
    expect(new RouteTable([]).routesDescription).toBe("none");
  });

  it("lists every route of its generation", () => {
    expect([...table.routes()]).toEqual([root, api, apiV2, hosted]);
  });
});
