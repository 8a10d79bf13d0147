import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { useEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki } from "../helpers/tls.js";
import { startTestProxy, type TestProxy } from "./harness.js";
import { createStubTokens } from "./stub-tokens.js";

/** What the client receives: the upstream's answer as sent, minus hop-by-hop fields. */
describe("responses from the emulator", () => {
  const emulator = useEmulator();
  let proxy: TestProxy;

  beforeAll(async () => {
    proxy = await startTestProxy({
      caPem: emulator().caPem,
      tokens: "real",
      config: { upstreams: [{ name: "api", baseUrl: emulator().url }] },
    });
  });
  afterAll(() => proxy.close());

  const get = (path: string, method = "GET") =>
    rawRequest(proxy.port, `${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);

  it("redirects are passed to the client, never followed", async () => {
    emulator().resetStats();
    const exchange = await get("/redirect");
    const response = exchange.responses[0]!;
    expect(response.status).toBe(307);
    expect(response.headers.get("location")).toEqual(["https://example.invalid/"]);
    expect(response.headers.get("bearer-proxy-error")).toBeUndefined();
    expect(emulator().stats().apiRequests).toBe(1);
  });

  it("several Set-Cookie fields arrive intact and separate", async () => {
    const exchange = await get("/set-cookies");
    expect(exchange.responses[0]!.headers.get("set-cookie")).toEqual([
      "a=1; Path=/; Secure; HttpOnly",
      "b=2; Path=/; Max-Age=60",
    ]);
  });

  it("the demo spreadsheet route answers through the proxy", async () => {
    const exchange = await get("/platform/v1/spreadsheets/demo");
    expect(exchange.responses[0]!.status).toBe(200);
    expect(JSON.parse(exchange.responses[0]!.body)).toMatchObject({ id: "demo" });
  });

  it("HEAD gets headers and no body", async () => {
    const exchange = await get("/echo/head", "HEAD");
    expect(exchange.text.startsWith("HTTP/1.1 200")).toBe(true);
    expect(exchange.text).toMatch(/\r\ncontent-length: [1-9][0-9]*\r\n/i);
    expect(exchange.text.endsWith("\r\n\r\n")).toBe(true);
  });

  it("upstream errors are the upstream's (no bearer-proxy-error)", async () => {
    const exchange = await get("/no-such-route");
    expect(exchange.responses[0]!.status).toBe(404);
    expect(exchange.responses[0]!.headers.get("bearer-proxy-error")).toBeUndefined();
  });
});

describe("hop-by-hop fields in responses", () => {
  let upstream: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startFakeUpstream({
      cert: pki.good,
      handler: (_req, res) => {
        res.writeHead(203, [
          "Connection",
          "x-hop",
          "X-Hop",
          "1",
          "Keep-Alive",
          "timeout=99",
          "Proxy-Authenticate",
          "Basic",
          "X-Kept",
          "a",
          "x-kept",
          "b",
          "Content-Length",
          "2",
        ]);
        res.end("ok");
      },
    });
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { u: createStubTokens() },
      config: { upstreams: [{ name: "u", baseUrl: upstream.origin }] },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  it("are dropped; the rest keeps its status, order and duplicates", async () => {
    const exchange = await rawRequest(
      proxy.port,
      "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    const response = exchange.responses[0]!;
    expect(response.status).toBe(203);
    expect(response.headers.get("x-hop")).toBeUndefined();
    expect(response.headers.get("keep-alive")).toBeUndefined();
    expect(response.headers.get("proxy-authenticate")).toBeUndefined();
    expect(response.headers.get("x-kept")).toEqual(["a", "b"]);
    expect(response.headers.get("connection")).toEqual(["close"]);
    expect(response.body).toBe("ok");
  });
});
