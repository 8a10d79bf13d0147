import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki } from "../helpers/tls.js";
import { startTestProxy, type TestProxy } from "./harness.js";
import { createStubTokens } from "./stub-tokens.js";

/**
 * Paths reach the upstream as normalized (issue 30), queries byte for byte; unsafe ones never
 * leave the proxy.
 */
describe("request paths", () => {
  let upstream: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startFakeUpstream({ cert: pki.good });
    const tokens = createStubTokens();
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { root: tokens, api: tokens, based: tokens, hosted: tokens },
      config: {
        upstreams: [
          { name: "root", baseUrl: upstream.origin },
          {
            name: "api",
            baseUrl: upstream.origin,
            match: { pathPrefix: "/api" },
            stripPrefix: true,
          },
          {
            name: "based",
            baseUrl: `${upstream.origin}/base/v1`,
            match: { pathPrefix: "/based/" },
            stripPrefix: true,
          },
          {
            name: "hosted",
            baseUrl: `${upstream.origin}/hosted`,
            match: { pathPrefix: "/", hosts: ["api.example.test"] },
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  async function send(target: string, host = "127.0.0.1") {
    const before = upstream.requests.length;
    const exchange = await rawRequest(
      proxy.port,
      `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`,
    );
    const response = exchange.responses[0]!;
    const forwarded = upstream.requests.slice(before);
    return { response, forwarded, sent: forwarded[0]?.url };
  }

  it.each([
    // Issue 30: the path is normalized (unreserved characters decoded, other escapes in
    // uppercase hex, slashes merged); the query string is forwarded byte-exact.
    ["/echo/a%3bb//c;d?x=1+2", "/echo/a%3Bb/c;d?x=1+2"],
    ["/echo/%7e%7E~?q=%20+%2B&&a=", "/echo/~~~?q=%20+%2B&&a="],
    ["/echo/x?q=%2f%61//%7e", "/echo/x?q=%2f%61//%7e"],
    ["/echo/x?path=/../../etc", "/echo/x?path=/../../etc"],
    ["/apix/echo", "/apix/echo"],
    ["/api", "/"],
    ["/api?x=1", "/?x=1"],
    ["/%61pi/echo/%25%2541", "/echo/%25%2541"],
    ["//api//echo", "/echo"],
    ["/echo/v1.2/..x/x..", "/echo/v1.2/..x/x.."],
    ["/echo/%2e%2ex/%2ehidden", "/echo/..x/.hidden"],
    ["/based/echo/q?z", "/base/v1/echo/q?z"],
    ["/based/", "/base/v1/"],
  ])("%s is sent upstream as %s", async (target, expected) => {
    const { response, sent } = await send(target);
    // The fake upstream answers (200 for its echo route, 404 elsewhere), never the proxy.
    expect(response.headers.get("bearer-proxy-error")).toBeUndefined();
    expect(sent).toBe(expected);
  });

  it("refuses an encoded slash with 400 ambiguous_path (escapedSlashes: reject, the default)", async () => {
    for (const target of ["/echo/a%2Fb", "/api/echo/a%2fb?x=1"]) {
      const { response, forwarded } = await send(target);
      expect(response.status).toBe(400);
      expect(response.headers.get("bearer-proxy-error")).toEqual(["ambiguous_path"]);
      expect(forwarded).toEqual([]);
    }
  });

  it("routes by Host before path: a host in match.hosts only reaches its upstreams", async () => {
    expect((await send("/echo/h", "api.example.test")).sent).toBe("/hosted/echo/h");
    expect((await send("/echo/h", "API.Example.Test:80")).sent).toBe("/hosted/echo/h");
    // Another port is another authority: back to the host-less upstreams.
    expect((await send("/echo/h", "api.example.test:8080")).sent).toBe("/echo/h");
  });

  it.each([
    "/echo/./x",
    "/echo/../x",
    "/api/../echo",
    "/echo/.",
    "/echo/..",
    "/echo/%2e%2e/x",
    "/echo/%2E/x",
    "/echo/.%2e/x",
    "/echo/..;/x",
    "/echo\\..\\x",
    "/echo/a%5cb",
    // Issue 14, defect 4: percent-encoded dot-segments and delimiters, any case, double-encoded.
    "/api/echo/a%2F..%2Fb",
    "/echo/..%2fx",
    "/echo/..%2Fx",
    "/echo/%2e%2e%2fx",
    "/echo/%2E%2e%2Fx",
    "/echo/.%2e%2fx",
    "/echo/..%5cx",
    "/echo/..%5Cx",
    "/echo/%2e%2e%5cx",
    "/echo/%252e%252e%252fx",
    "/echo/..%252f",
    "/echo/x/..%2f..%2f..%2fetc/passwd",
    "/echo/%2e%2e;/x",
    "/echo/a%2f.%2fb",
  ])("refuses %s with 400 bad_request and forwards nothing", async (target) => {
    const { response, forwarded } = await send(target);
    expect(response.status).toBe(400);
    expect(response.headers.get("bearer-proxy-error")).toEqual(["bad_request"]);
    expect(JSON.parse(response.body).error.code).toBe("bad_request");
    expect(forwarded).toEqual([]);
  });

  it("answers 404 no_route naming the configured routes when nothing matches", async () => {
    const only = await startTestProxy({
      tokens: { a: createStubTokens() },
      config: {
        upstreams: [{ name: "a", baseUrl: upstream.origin, match: { pathPrefix: "/only/" } }],
      },
    });
    try {
      // Two on one connection: a 404 keeps the connection alive.
      const exchange = await rawRequest(
        only.port,
        "GET /elsewhere HTTP/1.1\r\nHost: x\r\n\r\nGET /elsewhere2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
      );
      expect(exchange.responses.map((r) => r.status)).toEqual([404, 404]);
      const response = exchange.responses[0]!;
      expect(response.headers.get("connection")).toEqual(["keep-alive"]);
      expect(response.status).toBe(404);
      expect(response.headers.get("bearer-proxy-error")).toEqual(["no_route"]);
      const body = JSON.parse(response.body);
      expect(body.error.code).toBe("no_route");
      expect(body.error.message).toContain("/only/");
      expect(body.error.message).not.toContain("127.0.0.1");
    } finally {
      await only.close();
    }
  });
});

/** Issue 30: with `escapedSlashes: keep` an encoded slash is data, routed and forwarded as %2F. */
describe("request paths with paths.escapedSlashes: keep", () => {
  let upstream: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startFakeUpstream({ cert: pki.good });
    const tokens = createStubTokens();
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { root: tokens, api: tokens },
      config: {
        paths: { escapedSlashes: "keep" },
        upstreams: [
          { name: "root", baseUrl: upstream.origin },
          {
            name: "api",
            baseUrl: upstream.origin,
            match: { pathPrefix: "/api" },
            stripPrefix: true,
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  it.each([
    ["/api/echo/a%2Fb%2fc", "/echo/a%2Fb%2Fc"],
    // Not the /api prefix: %2F is no segment boundary for the router either.
    ["/api%2fecho", "/api%2Fecho"],
    ["/echo/%61%2f%2F?q=%2f", "/echo/a%2F%2F?q=%2f"],
  ])("%s is sent upstream as %s", async (target, expected) => {
    const before = upstream.requests.length;
    const exchange = await rawRequest(
      proxy.port,
      `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
    );
    expect(exchange.responses[0]!.headers.get("bearer-proxy-error")).toBeUndefined();
    expect(upstream.requests.slice(before).map((r) => r.url)).toEqual([expected]);
  });
});
