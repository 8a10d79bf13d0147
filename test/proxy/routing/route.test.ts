/**
 * One upstream as the pipeline sees it (src/proxy/routing/route.ts): built once per routing
 * generation with its header builder, its credential writer and its dispatchers (the fresh and
 * the upgrade one default to the pooled one), its pacing; only the token source is looked up
 * per call, since the registry may evict an idle one and make it again.
 */
import { describe, expect, it } from "vitest";
import { buildRoutes, Route, type RouteSources } from "../../../src/proxy/routing/route.js";
import type { TokenProvider } from "../../../src/token/token-provider.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { createStubTokens } from "../stub-tokens.js";
import { makePacing, ScriptedDispatcher, testToken } from "../support/pipeline-fakes.js";

const config = makeUpstreamConfig("api");

function sources(overrides: Partial<RouteSources> = {}) {
  const asked: string[] = [];
  const pooled = new ScriptedDispatcher("pooled");
  let tokens: TokenProvider = createStubTokens("first");
  const s: RouteSources = {
    tokenFor: (name) => {
      asked.push(`tokens:${name}`);
      return tokens;
    },
    dispatcherFor: (name) => {
      asked.push(`dispatcher:${name}`);
      return pooled;
    },
    ...overrides,
  };
  return {
    sources: s,
    asked,
    pooled,
    replaceTokens: (next: TokenProvider) => {
      tokens = next;
    },
  };
}

describe("Route", () => {
  it("takes its name and config, and its dispatchers once, at construction", () => {
    const { sources: s, asked, pooled } = sources();
    const route = new Route(config, s);
    expect(route.name).toBe("api");
    expect(route.config).toBe(config);
    expect(route.dispatcher).toBe(pooled);
    // Without their own, the fresh and upgrade dispatchers are the pooled one.
    expect(route.freshDispatcher).toBe(pooled);
    expect(route.upgradeDispatcher).toBe(pooled);
    expect(route.pacing).toBeUndefined();
    expect(asked).toEqual(["dispatcher:api"]);
  });

  it("uses the fresh, upgrade and pacing sources when given", () => {
    const fresh = new ScriptedDispatcher("fresh");
    const upgrade = new ScriptedDispatcher("upgrade");
    const pacing = makePacing(config);
    const { sources: s } = sources({
      freshDispatcherFor: () => fresh,
      upgradeDispatcherFor: () => upgrade,
      pacingFor: () => pacing,
    });
    const route = new Route(config, s);
    expect(route.freshDispatcher).toBe(fresh);
    expect(route.upgradeDispatcher).toBe(upgrade);
    expect(route.pacing).toBe(pacing);
  });

  it("asks the registry for the token source on every call (an evicted source is made again)", async () => {
    const { sources: s, asked, replaceTokens } = sources();
    const route = new Route(config, s);
    expect((await route.tokens().getToken()).value).toBe("first-1");
    replaceTokens(createStubTokens("second"));
    expect((await route.tokens().getToken()).value).toBe("second-1");
    expect(asked.filter((a) => a.startsWith("tokens:"))).toEqual(["tokens:api", "tokens:api"]);
  });

  it("builds the forwarded header list with the credential slots, and drops the client's trace context when told", () => {
    const raw = ["traceparent", "00-abc-def-01", "accept", "*/*"];
    const plain = new Route(config, sources().sources);
    const built = plain.headers.build(raw, { remoteAddress: undefined, authority: "a" });
    expect(built.kind === "ok" && built.headers.includes("traceparent")).toBe(true);

    const traced = new Route(config, sources().sources, { dropTraceContext: true });
    const rebuilt = traced.headers.build(raw, { remoteAddress: undefined, authority: "a" });
    expect(rebuilt.kind).toBe("ok");
    if (rebuilt.kind !== "ok") return;
    expect(rebuilt.headers).not.toContain("traceparent");
    expect(rebuilt.headers[rebuilt.authorizationIndex - 1]).toBe("authorization");
  });

  it("has its own credential writer", () => {
    const route = new Route(config, sources().sources);
    const headers = ["authorization", ""];
    route.credential.inject(
      headers,
      { authorizationIndex: 1, dpopIndex: -1 },
      testToken("t"),
      "GET",
      "",
    );
    expect(headers[1]).toBe("Bearer t");
  });
});

describe("buildRoutes", () => {
  it("builds one Route per upstream, by name", () => {
    const other = makeUpstreamConfig("other");
    const routes = buildRoutes([config, other], sources().sources);
    expect([...routes.keys()]).toEqual(["api", "other"]);
    expect(routes.get("other")?.config).toBe(other);
  });
});
