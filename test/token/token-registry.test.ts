import { Agent } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { localCredentialKey as credentialKey } from "../../src/config/credential-identity.js";
import type { UpstreamConfig } from "../../src/config/proxy-config.js";
import { createTokenRegistry, type TokenRegistry } from "../../src/token/token-registry.js";
import { createTokenSource, type TokenSourceOptions } from "../../src/token/token-source.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { makeUpstreamConfig } from "../helpers/upstream-config.js";
import { FakeTokenEndpoint } from "./fake-endpoint.js";
import { captureLogs, DEFAULT_POLICY, TEST_SECRET } from "./helpers.js";

/** An upstream at https://api.test whose client secret is `secret`. */
function upstream(
  name: string,
  secret: string,
  overrides: Partial<UpstreamConfig> = {},
): UpstreamConfig {
  return makeUpstreamConfig(name, { baseUrl: "https://api.test", clientSecret: secret }, overrides);
}

let registry: TokenRegistry | undefined;
const agent = new Agent();
afterEach(() => registry?.close());

function setup(
  upstreams: UpstreamConfig[],
  limits: { maxSources?: number; eagerLimit?: number } = {},
) {
  const clock = new FakeClock();
  const endpoint = new FakeTokenEndpoint(clock);
  const created: TokenSourceOptions[] = [];
  const closed: string[] = [];
  registry = createTokenRegistry({
    upstreams,
    maxSources: limits.maxSources ?? 100,
    eagerLimit: limits.eagerLimit ?? 10,
    dispatcherFor: () => agent,
    clock,
    logger: captureLogs().logger,
    createSource: (options) => {
      created.push(options);
      const source = createTokenSource({ ...options, fetchToken: endpoint.fetchToken });
      const close = source.close.bind(source);
      source.close = () => {
        closed.push(options.upstream);
        close();
      };
      return source;
    },
  });
  return { clock, endpoint, created, closed, registry };
}

describe("token registry", () => {
  it("upstreams with the same credential share one source and one token request", async () => {
    const { clock, endpoint, created, registry } = setup([
      upstream("a", TEST_SECRET),
      upstream("b", TEST_SECRET),
      upstream("c", "other-secret"),
    ]);
    expect(registry.credentialCount).toBe(2);
    registry.startEager();
    await clock.advance(0);
    expect(endpoint.calls).toHaveLength(2);
    expect(created.map((o) => o.upstreams)).toEqual([["a", "b"], ["c"]]);
    const [a, b, c] = await Promise.all(
      ["a", "b", "c"].map((n) => registry.forUpstream(n).getToken()),
    );
    expect(a!.value).toBe(b!.value);
    expect(c!.value).not.toBe(a!.value);
    expect(registry.forUpstream("a")).toBe(registry.forUpstream("a"));
    expect(() => registry.forUpstream("nope")).toThrow(/no upstream named "nope"/);
  });

  it("the key covers every token-determining field and never holds an inline secret", () => {
    const base = upstream("a", TEST_SECRET);
    const key = credentialKey(base);
    expect(key).not.toContain(TEST_SECRET);
    const variants: Partial<UpstreamConfig["token"]>[] = [
      { tokenUrl: "https://idp.test/oauth2/token" },
      { clientId: { kind: "inline", value: "other" } },
      { scope: "files:read" },
      { versionHeader: "2026-09-01.scripting.preview" },
      { extraParams: { audience: "x" } },
      { format: "json" },
      { clientAuth: "basic" },
      { clientSecret: { kind: "file", path: "/run/secret" } },
      { extraHeaders: { "x-tenant": "b" } },
      { tls: { ...base.token.tls, certFile: "/run/tenant-b.crt", keyFile: "/run/tenant-b.key" } },
      { allowInsecureHttp: !base.token.allowInsecureHttp },
    ];
    for (const variant of variants) {
      expect(credentialKey({ ...base, token: { ...base.token, ...variant } })).not.toBe(key);
    }
    expect(credentialKey(upstream("renamed", TEST_SECRET))).toBe(key);
  });

  it("prefetches the first eagerLimit credentials in config order; lazy beyond, and lazy sources skip idle refreshes", async () => {
    const many = Array.from({ length: 6 }, (_, i) => upstream(`u${i}`, `secret-${i}`));
    const { clock, endpoint, created, registry } = setup(many, { eagerLimit: 4 });
    expect(registry.prefetchCount).toBe(4);
    registry.startEager();
    await clock.advance(0);
    expect(endpoint.calls).toHaveLength(4);
    expect(created.map((o) => o.upstream)).toEqual(["u0", "u1", "u2", "u3"]);
    expect(created.every((o) => o.idleRefresh === true)).toBe(true);
    expect(registry.modeOf("u3")).toEqual({ mode: "prefetch", decidedBy: "eagerLimit" });
    expect(registry.modeOf("u4")).toEqual({ mode: "lazy", decidedBy: "eagerLimit" });
    expect(registry.statuses().get("u4")!.state).toBe("idle");

    await registry.forUpstream("u4").getToken();
    expect(endpoint.calls).toHaveLength(5);
    expect(created[4]!.idleRefresh).toBe(false);
    await clock.advance(700_000); // u4 unused: no background refresh, its token just lapses
    const u4Calls = () =>
      endpoint.calls.filter((c) => c.credentials.clientSecret === "secret-4").length;
    expect(u4Calls()).toBe(1);
    await registry.forUpstream("u4").getToken();
    expect(u4Calls()).toBe(2);
  });

  it("an explicit token.prefetch wins over eagerLimit, both ways", async () => {
    const explicit = (name: string, secret: string, prefetch: boolean) =>
      upstream(name, secret, {
        tokenPolicy: { ...DEFAULT_POLICY, prefetch, prefetchExplicit: true },
      });
    const { clock, endpoint, registry } = setup(
      [
        explicit("off", "s0", false),
        upstream("first", "s1"),
        upstream("second", "s2"),
        explicit("pinned", "s3", true),
      ],
      { eagerLimit: 1 },
    );
    registry.startEager();
    await clock.advance(0);
    expect(endpoint.calls).toHaveLength(2);
    expect(registry.modeOf("off")).toEqual({ mode: "lazy", decidedBy: "token.prefetch" });
    expect(registry.modeOf("first")).toEqual({ mode: "prefetch", decidedBy: "eagerLimit" });
    expect(registry.modeOf("second")).toEqual({ mode: "lazy", decidedBy: "eagerLimit" });
    expect(registry.modeOf("pinned")).toEqual({ mode: "prefetch", decidedBy: "token.prefetch" });
    expect(registry.statuses().get("pinned")!.state).toBe("valid");
    expect(registry.statuses().get("second")!.state).toBe("idle");
  });

  it("prefetch: false upstreams are not fetched at start", async () => {
    const { clock, endpoint, registry } = setup([
      upstream("a", "s1"),
      upstream("b", "s2", { tokenPolicy: { ...DEFAULT_POLICY, prefetch: false } }),
    ]);
    registry.startEager();
    await clock.advance(0);
    expect(endpoint.calls).toHaveLength(1);
    expect(registry.statuses().get("b")!.state).toBe("idle");
    expect(registry.statuses().get("a")!.state).toBe("valid");
  });

  it("bounded: the least recently used source is closed (timers stop) and recreated on next use", async () => {
    const { clock, endpoint, closed, registry } = setup(
      [upstream("a", "s1"), upstream("b", "s2"), upstream("c", "s3")],
      { maxSources: 2, eagerLimit: 0 },
    );
    await registry.forUpstream("a").getToken();
    await registry.forUpstream("b").getToken();
    expect(clock.pendingTimers).toBe(2);
    await registry.forUpstream("c").getToken();
    expect(closed).toEqual(["a"]);
    expect(clock.pendingTimers).toBe(2);
    expect(registry.statuses().get("a")!.state).toBe("idle");
    expect(registry.forUpstream("a").invalidate({ value: "x" } as never)).toBe(false);
    await registry.forUpstream("a").getToken();
    expect(endpoint.calls).toHaveLength(4);
    expect(closed).toEqual(["a", "b"]);
  });

  it("close() closes every source and later requests reject", async () => {
    const { clock, registry } = setup([upstream("a", "s1"), upstream("b", "s2")]);
    registry.startEager();
    await clock.advance(0);
    registry.close();
    expect(clock.pendingTimers).toBe(0);
    await expect(registry.forUpstream("a").getToken()).rejects.toMatchObject({
      code: "BP_ERR_TOKEN_UNAVAILABLE",
    });
    expect(registry.statuses().get("a")!.state).toBe("closed");
    registry.close();
  });
});
