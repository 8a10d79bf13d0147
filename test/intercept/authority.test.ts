/**
 * Which CONNECT names which intercepted upstream (base/authority.ts): the base URL's host,
 * case-insensitively, with 443 for a base URL without a port; a CONNECT target in authority-form.
 */
import { describe, expect, it } from "vitest";
import {
  authorityHost,
  connectAuthority,
  interceptAuthority,
  interceptRoutes,
} from "../../src/base/authority.js";

describe("intercept authorities", () => {
  it.each([
    ["https://api.example.com", "api.example.com:443"],
    ["https://API.Example.com/v1/", "api.example.com:443"],
    ["https://api.example.com:443", "api.example.com:443"],
    ["https://api.example.com:8443/x", "api.example.com:8443"],
    ["https://10.0.0.5", "10.0.0.5:443"],
    ["https://[::1]:9443", "[::1]:9443"],
    ["https://[0:0:0:0:0:0:0:1]", "[::1]:443"],
  ])("the base URL %s intercepts CONNECT %s", (baseUrl, authority) => {
    expect(interceptAuthority(baseUrl)).toBe(authority);
  });

  it.each([
    ["api.example.com:443", "api.example.com:443"],
    ["API.EXAMPLE.COM:443", "api.example.com:443"],
    ["api.example.com:8443", "api.example.com:8443"],
    ["10.0.0.5:443", "10.0.0.5:443"],
    ["[::1]:443", "[::1]:443"],
    ["[0:0:0:0:0:0:0:1]:9443", "[::1]:9443"],
  ])("CONNECT %s reads as %s", (target, authority) => {
    expect(connectAuthority(target)).toBe(authority);
  });

  it.each([
    "api.example.com",
    "api.example.com:",
    "api.example.com:0",
    "api.example.com:70000",
    "https://api.example.com:443",
    "user@api.example.com:443",
    "api.example.com:443/path",
    "::1:443",
    "",
  ])("refuses the CONNECT target %j (not host:port)", (target) => {
    expect(connectAuthority(target)).toBeUndefined();
  });

  it("names the host a leaf certificate is made for", () => {
    expect(authorityHost("api.example.com:443")).toBe("api.example.com");
    expect(authorityHost("[::1]:8443")).toBe("::1");
  });

  it("routes each authority to its intercepted upstream, ignoring the others", () => {
    const upstreams = [
      { name: "plain", baseUrl: "https://api.example.com", intercept: false },
      { name: "sheets", baseUrl: "https://API.example.com/v1", intercept: true },
      { name: "files", baseUrl: "https://files.example.com:8443", intercept: true },
    ];
    const routes = interceptRoutes(upstreams);
    expect([...routes].map(([authority, u]) => [authority, u.name])).toEqual([
      ["api.example.com:443", "sheets"],
      ["files.example.com:8443", "files"],
    ]);
    expect(routes.get(connectAuthority("Api.Example.Com:443") ?? "")?.name).toBe("sheets");
    expect(routes.get(connectAuthority("api.example.com:8443") ?? "")).toBeUndefined();
  });
});
