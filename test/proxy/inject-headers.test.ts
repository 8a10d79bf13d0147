import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { UpstreamConfig } from "../../src/config/proxy-config.js";
import { authorizationValue } from "../../src/proxy/credential.js";
import { createHeaderInjector } from "../../src/proxy/routing/forwarded-headers.js";
import type { AccessToken } from "../../src/token/token-provider.js";

function upstream(overrides: Partial<UpstreamConfig> = {}): UpstreamConfig {
  return {
    name: "u",
    origin: "https://api.example.com",
    versionHeader: "2026-09-01.scripting.preview",
    clientCredentials: "strip",
    forwardedHeaders: false,
    headers: { "X-Team": "payments" },
    ...overrides,
  } as unknown as UpstreamConfig;
}

function token(value: string): AccessToken {
  return {
    value,
    fingerprint: "00000000",
    scope: undefined,
    obtainedAtMs: 0,
    expiresAtMs: 1,
    expiresAtWallMs: 1,
    lifetimeMs: 1,
  };
}

function build(raw: string[], u = upstream()) {
  const result = createHeaderInjector(u).build(raw, { remoteAddress: "10.1.2.3", authority: "a" });
  if (result.kind === "ok")
    result.headers[result.authorizationIndex] = authorizationValue(token("T0k.en"));
  return result;
}

function pairs(list: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < list.length; i += 2) out.push([list[i]!.toLowerCase(), list[i + 1]!]);
  return out;
}

describe("inject-headers", () => {
  it("replaces credentials, drops hop-by-hop, keeps the rest in order", () => {
    const result = build([
      "Authorization",
      "Basic x",
      "X-Version",
      "old",
      "Connection",
      "authorization, X-Version, x-drop, host",
      "X-Drop",
      "1",
      "Host",
      "client.example",
      "X-Forwarded-For",
      "1.1.1.1",
      "Accept",
      "a",
      "accept",
      "b",
      "Content-Length",
      "12",
      "Expect",
      "100-continue",
      "X-Team",
      "spoof",
    ]);
    expect(result.kind).toBe("ok");
    if (result.kind !== "ok") return;
    expect(pairs(result.headers)).toEqual([
      ["accept", "a"],
      ["accept", "b"],
      // The client's framing is kept (issue 15): undici sends a streamed body with it.
      ["content-length", "12"],
      ["host", "api.example.com"],
      ["authorization", "Bearer T0k.en"],
      ["x-version", "2026-09-01.scripting.preview"],
      ["x-team", "payments"],
    ]);
  });

  it("adds X-Forwarded-* only when opted in", () => {
    const result = build(
      ["X-Forwarded-For", "6.6.6.6"],
      upstream({ forwardedHeaders: true, headers: {} }),
    );
    if (result.kind !== "ok") throw new Error("rejected");
    expect(pairs(result.headers).filter(([n]) => n.startsWith("x-forwarded"))).toEqual([
      ["x-forwarded-for", "10.1.2.3"],
      ["x-forwarded-proto", "http"],
      ["x-forwarded-host", "a"],
    ]);
  });

  it("rejects client credentials when configured to", () => {
    const u = upstream({ clientCredentials: "reject" });
    expect(build(["authorization", "Bearer mine"], u).kind).toBe("reject");
    expect(build(["X-VERSION", "1"], u).kind).toBe("reject");
    expect(build(["accept", "x"], u).kind).toBe("ok");
  });

  it("refuses static headers the proxy manages, and unsafe tokens", () => {
    expect(() => createHeaderInjector(upstream({ headers: { Authorization: "x" } }))).toThrow(
      /managed/,
    );
    expect(() => createHeaderInjector(upstream({ headers: { "X-Forwarded-For": "x" } }))).toThrow(
      /managed/,
    );
    expect(() => authorizationValue(token("a b"))).toThrow();
    expect(() => authorizationValue(token("a\r\nx: y"))).toThrow();
  });

  it("no client header set can remove or alter what we inject, and no CR/LF gets out (property)", () => {
    const interesting = fc.constantFrom(
      "authorization",
      "Authorization",
      "x-version",
      "X-VERSION",
      "host",
      "Host",
      "connection",
      "Connection",
      "x-team",
      "keep-alive",
      "te",
      "upgrade",
      "transfer-encoding",
      "content-length",
      "trailer",
      "x-forwarded-for",
      "forwarded",
      "x-other",
    );
    const name = fc.oneof(
      interesting,
      fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/),
      fc.string(),
    );
    const value = fc.oneof(
      fc.string(),
      fc.constantFrom(
        "authorization, x-version, host, x-team",
        "close",
        "a\r\nInjected: 1",
        "\n",
        "x\0y",
      ),
    );
    const rawArb = fc.array(fc.tuple(name, value), { maxLength: 12 }).map((list) => list.flat());
    fc.assert(
      fc.property(rawArb, fc.boolean(), (raw, forwarded) => {
        const u = upstream({ forwardedHeaders: forwarded });
        const result = build(raw, u);
        if (result.kind === "reject") {
          // Only ever for a header that could not be sent safely.
          const contentLengths = raw.filter(
            (_item, i) => i % 2 === 1 && raw[i - 1]!.toLowerCase() === "content-length",
          );
          expect(
            raw.some((item, i) =>
              i % 2 === 1
                ? /[\r\n\0]|[^\t\x20-\x7e\x80-\xff]/.test(item)
                : !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(item),
            ) ||
              contentLengths.length > 1 ||
              contentLengths.some((v) => !/^[0-9]+$/.test(v)),
          ).toBe(true);
          return;
        }
        const out = pairs(result.headers);
        expect(out.filter(([n]) => n === "authorization")).toEqual([
          ["authorization", "Bearer T0k.en"],
        ]);
        expect(out.filter(([n]) => n === "x-version")).toEqual([
          ["x-version", "2026-09-01.scripting.preview"],
        ]);
        expect(out.filter(([n]) => n === "host")).toEqual([["host", "api.example.com"]]);
        expect(out.filter(([n]) => n === "x-team")).toEqual([["x-team", "payments"]]);
        for (const [n, v] of out) {
          expect(n).not.toMatch(/[\r\n\0]/);
          expect(v).not.toMatch(/[\r\n\0]/);
          expect([
            "connection",
            "keep-alive",
            "te",
            "upgrade",
            "transfer-encoding",
            "trailer",
            "forwarded",
          ]).not.toContain(n);
        }
        // The client's validated Content-Length frames the body upstream (issue 15), once.
        const lengths = out.filter(([n]) => n.toLowerCase() === "content-length");
        expect(lengths.length).toBeLessThanOrEqual(1);
        for (const [, v] of lengths) expect(v).toMatch(/^[0-9]+$/);
        if (!forwarded) expect(out.some(([n]) => n.startsWith("x-forwarded-"))).toBe(false);
      }),
      { numRuns: 3_000 },
    );
  });
});
