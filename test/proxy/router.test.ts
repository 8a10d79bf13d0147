import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { UpstreamConfig } from "../../src/config/proxy-config.js";
import { createRouter, normalizeAuthority } from "../../src/proxy/routing/router.js";

function upstream(name: string, pathPrefix: string, hosts: string[] = []): UpstreamConfig {
  return { name, match: { pathPrefix, hosts } } as unknown as UpstreamConfig;
}

describe("router", () => {
  const router = createRouter([
    upstream("root", "/"),
    upstream("api", "/api"),
    upstream("api-v2", "/api/v2/"),
    upstream("host-root", "/", ["api.example.com"]),
    upstream("host-admin", "/admin", ["api.example.com:8443"]),
  ]);
  const route = (authority: string | undefined, path: string) =>
    router.route(authority, path)?.name;

  it("picks the longest prefix on a segment boundary", () => {
    expect(route("x", "/")).toBe("root");
    expect(route("x", "/api")).toBe("api");
    expect(route("x", "/api/")).toBe("api");
    expect(route("x", "/api/x")).toBe("api");
    expect(route("x", "/apix")).toBe("root");
    expect(route("x", "/api/v2")).toBe("api");
    expect(route("x", "/api/v2/")).toBe("api-v2");
    expect(route("x", "/api/v2/things")).toBe("api-v2");
    expect(route(undefined, "/api")).toBe("api");
  });

  it("selects by host first; a host entry without port means port 80", () => {
    expect(route("api.example.com", "/api")).toBe("host-root");
    expect(route("API.EXAMPLE.COM:80", "/x")).toBe("host-root");
    expect(route("api.example.com:", "/x")).toBe("host-root");
    expect(route("api.example.com:8443", "/admin/x")).toBe("host-admin");
    expect(route("api.example.com:8443", "/other")).toBeUndefined();
    expect(route("api.example.com:81", "/api")).toBe("api");
    expect(router.isKnownHost("api.example.com")).toBe(true);
    expect(router.isKnownHost("api.example.com:8443")).toBe(true);
    expect(router.isKnownHost("other.example.com")).toBe(false);
  });

  it("normalises authorities", () => {
    expect(normalizeAuthority("A.b")).toBe("a.b:80");
    expect(normalizeAuthority("a.b:443")).toBe("a.b:443");
    expect(normalizeAuthority("[::1]")).toBe("[::1]:80");
    expect(normalizeAuthority("[::1]:8080")).toBe("[::1]:8080");
  });

  it("refuses two upstreams claiming the same requests", () => {
    expect(() => createRouter([upstream("a", "/x"), upstream("b", "/x")])).toThrow(/a and b/);
  });

  it("describes routes without anything but config names", () => {
    expect(router.routesDescription).toContain("/api/v2/");
    expect(router.routesDescription).toContain("api.example.com");
  });

  /** The rules, written the slow and obvious way. */
  function reference(
    upstreams: UpstreamConfig[],
    authority: string | undefined,
    path: string,
  ): string | undefined {
    const key = authority === undefined ? undefined : normalizeAuthority(authority);
    const byHost = upstreams.filter(
      (u) => key !== undefined && u.match.hosts.map(normalizeAuthority).includes(key),
    );
    const candidates =
      byHost.length > 0 ? byHost : upstreams.filter((u) => u.match.hosts.length === 0);
    const matching = candidates.filter((u) => {
      const p = u.match.pathPrefix;
      if (path === p) return true;
      if (!path.startsWith(p)) return false;
      return p.endsWith("/") || path[p.length] === "/";
    });
    matching.sort((a, b) => b.match.pathPrefix.length - a.match.pathPrefix.length);
    return matching[0]?.name;
  }

  // Up to 8 prefixes per table are tested one by one, more through the Map walk: both kinds.
  it.each([
    { tables: "a few prefixes", minLength: 0, maxLength: 8 },
    { tables: "many prefixes", minLength: 9, maxLength: 16 },
  ])(
    "never selects an upstream the rules don't allow, $tables (property)",
    ({ minLength, maxLength }) => {
      const segment = fc.constantFrom("a", "b", "ab", "", ".", "%2F", "x;y");
      const pathArb = fc
        .array(segment, { minLength: 0, maxLength: 5 })
        .map((parts) => `/${parts.join("/")}`);
      const hostArb = fc.constantFrom("h1", "h1:80", "h2:8080", "H1", "h3");
      const configArb = fc
        .uniqueArray(
          fc.record({
            prefix: fc.oneof(
              pathArb,
              pathArb.map((p) => (p.endsWith("/") ? p : `${p}/`)),
            ),
            hosts: fc.subarray(["h1", "h2:8080"]),
          }),
          {
            minLength,
            maxLength,
            // Two upstreams may not claim the same (host, prefix): config validation refuses it.
            selector: (u) => `${u.prefix}|${u.hosts.length === 0 ? "*" : ""}`,
          },
        )
        .filter((list) => {
          const seen = new Set<string>();
          for (const u of list) {
            for (const h of u.hosts.length === 0 ? ["*"] : u.hosts) {
              const k = `${normalizeAuthority(h)}|${u.prefix}`;
              if (seen.has(k)) return false;
              seen.add(k);
            }
          }
          return true;
        });
      fc.assert(
        fc.property(
          configArb,
          fc.option(hostArb, { nil: undefined }),
          pathArb,
          (list, authority, path) => {
            const upstreams = list.map((u, i) => upstream(`u${i}`, u.prefix, u.hosts));
            const router = createRouter(upstreams);
            expect(router.route(authority, path)?.name).toBe(reference(upstreams, authority, path));
          },
        ),
        { numRuns: 2_000 },
      );
    },
  );
});
