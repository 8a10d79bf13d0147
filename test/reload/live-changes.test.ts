/** Issue 18: a reload that would need new sockets or server options is refused whole, by path. */
import { describe, expect, it } from "vitest";
import type { ProxyConfig } from "../../src/config/proxy-config.js";
import { changesNeedingRestart } from "../../src/reload/live-changes.js";
import { makeProxyConfig, makeUpstreamConfig } from "../helpers/upstream-config.js";

const base = makeProxyConfig([makeUpstreamConfig("files"), makeUpstreamConfig("reports")]);
const variant = (change: (c: ProxyConfig) => ProxyConfig) =>
  changesNeedingRestart(base, change(base));

describe("changes needing a restart", () => {
  it("none for upstreams added, removed or changed, or token settings", () => {
    expect(variant((c) => ({ ...c, upstreams: [c.upstreams[0]!] }))).toEqual([]);
    expect(
      variant((c) => ({
        ...c,
        upstreams: [...c.upstreams, makeUpstreamConfig("new", { baseUrl: "https://new.test" })],
      })),
    ).toEqual([]);
    expect(variant((c) => ({ ...c, tokenCache: { ...c.tokenCache, eagerLimit: 3 } }))).toEqual([]);
    expect(variant((c) => ({ ...c, log: { ...c.log, level: "debug" } }))).toEqual([]);
    // Issue 30: path rules apply to the next generation of the routing, like routes do.
    expect(
      variant((c) => ({ ...c, paths: { mergeSlashes: false, escapedSlashes: "keep" } })),
    ).toEqual([]);
  });

  it("names an egress proxy or sustained-overload change (read once at start)", () => {
    expect(variant((c) => ({ ...c, egressProxy: "http://127.0.0.1:3128" }))).toEqual([
      "egressProxy",
    ]);
    expect(
      variant((c) => ({ ...c, readiness: { ...c.readiness, requireTokens: "none" } })),
    ).toEqual([]);
    expect(variant((c) => ({ ...c, limits: { ...c.limits, sustainedOverloadMs: 1 } }))).toEqual([
      "limits.sustainedOverloadMs",
    ]);
  });

  it("names a change of the interception CA (loaded once, before the listeners bind)", () => {
    const ca = { caCertFile: "/etc/bp/ca.pem", caKeyFile: "/etc/bp/ca-key.pem" };
    expect(variant((c) => ({ ...c, intercept: ca }))).toEqual(["intercept"]);
    const withCa = { ...base, intercept: ca };
    expect(changesNeedingRestart(withCa, { ...withCa, intercept: { ...ca } })).toEqual([]);
    expect(
      changesNeedingRestart(withCa, { ...withCa, intercept: { ...ca, caKeyFile: "/other.pem" } }),
    ).toEqual(["intercept"]);
  });

  it("names each listener, server option, log format and Redis change", () => {
    expect(variant((c) => ({ ...c, listen: { ...c.listen, port: c.listen.port + 1 } }))).toEqual([
      "listen",
    ]);
    expect(variant((c) => ({ ...c, admin: { ...c.admin, host: "0.0.0.0" } }))).toEqual(["admin"]);
    expect(
      variant((c) => ({
        ...c,
        limits: { ...c.limits, maxHeaderSizeBytes: 1, keepAliveTimeoutMs: 1 },
        log: { ...c.log, format: c.log.format === "json" ? "pretty" : "json" },
        tokenCache: {
          ...c.tokenCache,
          redis: { url: "redis://x", keyPrefix: "", lockTtlMs: 1, commandTimeoutMs: 1 },
        },
      })),
    ).toEqual([
      "log.format",
      "tokenCache.redis",
      "limits.maxHeaderSizeBytes",
      "limits.keepAliveTimeoutMs",
    ]);
    expect(
      variant((c) => ({
        ...c,
        upstreams: c.upstreams.map((u) =>
          u.name === "files" ? { ...u, listen: { host: "127.0.0.1", port: 9000 } } : u,
        ),
      })),
    ).toEqual(["upstreams[files].listen"]);
  });
});
