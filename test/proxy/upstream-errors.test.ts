import { readdirSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closedPort, type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { requestLogs, startTestProxy, type TestProxy } from "./harness.js";
import { createStubTokens } from "./stub-tokens.js";

/**
 * Every upstream failure provoked for real, each answered with its documented code — and the
 * proxy keeps serving, leaking neither sockets nor file descriptors.
 */
describe("upstream failures", () => {
  let pki: TestPki;
  let good: FakeUpstream;
  let otherCa: FakeUpstream;
  let wrongHost: FakeUpstream;
  let expired: FakeUpstream;
  let proxy: TestProxy;
  let refusedPort: number;
  /** Accepts TCP and never says a word: the TLS handshake can't complete. */
  let silent: Server;
  const silentSockets = new Set<Socket>();

  beforeAll(async () => {
    pki = await createTestPki();
    [good, otherCa, wrongHost, expired] = await Promise.all([
      startFakeUpstream({ cert: pki.good }),
      startFakeUpstream({ cert: pki.otherCa }),
      startFakeUpstream({ cert: pki.wrongHost }),
      startFakeUpstream({ cert: pki.expired }),
    ]);
    refusedPort = await closedPort();
    silent = createServer((socket) => {
      silentSockets.add(socket);
      socket.on("close", () => silentSockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const silentPort = (silent.address() as { port: number }).port;
    const timeouts = { connect: "2s", responseHeaders: "400ms", bodyIdle: "400ms" };
    const tokens = createStubTokens();
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: {
        good: tokens,
        refused: tokens,
        "other-ca": tokens,
        "wrong-host": tokens,
        expired: tokens,
        silent: tokens,
      },
      config: {
        upstreams: [
          {
            name: "good",
            baseUrl: good.origin,
            match: { pathPrefix: "/good" },
            stripPrefix: true,
            timeouts,
          },
          {
            name: "refused",
            baseUrl: `https://127.0.0.1:${refusedPort}`,
            match: { pathPrefix: "/refused" },
          },
          { name: "other-ca", baseUrl: otherCa.origin, match: { pathPrefix: "/other-ca" } },
          { name: "wrong-host", baseUrl: wrongHost.origin, match: { pathPrefix: "/wrong-host" } },
          { name: "expired", baseUrl: expired.origin, match: { pathPrefix: "/expired" } },
          {
            name: "silent",
            baseUrl: `https://127.0.0.1:${silentPort}`,
            match: { pathPrefix: "/silent" },
            timeouts: { connect: "300ms" },
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await Promise.all([good, otherCa, wrongHost, expired].map((u) => u.close()));
    for (const socket of silentSockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  async function get(path: string) {
    const response = await request(`${proxy.url}${path}`, { reset: true });
    const text = await response.body.text();
    return { status: response.statusCode, headers: response.headers, text };
  }

  function expectProxyError(
    answer: { status: number; headers: Record<string, unknown>; text: string },
    status: number,
    code: string,
    upstream: string,
  ) {
    expect(answer.status).toBe(status);
    expect(answer.headers["bearer-proxy-error"]).toBe(code);
    expect(answer.headers["content-type"]).toBe("application/json");
    const body = JSON.parse(answer.text);
    expect(body).toEqual({ error: { code, message: expect.any(String), upstream } });
    expect(answer.text).not.toMatch(/stub-token|\n\s+at |Error:/);
  }

  it("connection refused → 502 upstream_unreachable", async () => {
    expectProxyError(await get("/refused/x"), 502, "upstream_unreachable", "refused");
  });

  it.each([
    ["an untrusted CA (proves verification is on)", "/other-ca/x", "other-ca"],
    ["a certificate for another host name", "/wrong-host/x", "wrong-host"],
    ["an expired certificate", "/expired/x", "expired"],
  ])("%s → 502 upstream_tls_error, nothing sent", async (_name, path, upstream) => {
    const target = { "other-ca": otherCa, "wrong-host": wrongHost, expired }[upstream]!;
    expectProxyError(await get(path), 502, "upstream_tls_error", upstream);
    expect(target.requests).toEqual([]);
    expect(target.connections()).toBeGreaterThan(0);
  });

  it("connect (TCP + TLS handshake) too slow → 504 upstream_timeout", async () => {
    expectProxyError(await get("/silent/x"), 504, "upstream_timeout", "silent");
  });

  it("response headers too slow → 504 upstream_timeout", async () => {
    expectProxyError(await get("/good/slow-headers/3000"), 504, "upstream_timeout", "good");
  });

  it("reset before any response byte → one retry for a GET, then 502 upstream_reset", async () => {
    const before = good.requests.length;
    expectProxyError(await get("/good/reset-before-response"), 502, "upstream_reset", "good");
    expect(good.requests.length - before).toBe(2);
  });

  it("a POST reset before the response is not retried", async () => {
    const before = good.requests.length;
    const response = await request(`${proxy.url}/good/reset-before-response`, {
      method: "POST",
      body: "x",
      reset: true,
    });
    expect(response.statusCode).toBe(502);
    expect(response.headers["bearer-proxy-error"]).toBe("upstream_reset");
    await response.body.text();
    expect(good.requests.length - before).toBe(1);
  });

  it.each([
    ["reset mid-body", "/good/reset-mid-body", "upstream_reset"],
    ["a body that stalls", "/good/stall-body", "upstream_timeout"],
  ])(
    "%s → the status already sent stays, the client connection is cut short",
    async (_name, path, code) => {
      const exchange = await rawRequest(proxy.port, `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`, {
        timeoutMs: 3_000,
      });
      expect(exchange.closed).toBe(true);
      expect(exchange.text.startsWith("HTTP/1.1 200")).toBe(true);
      expect(exchange.text).toContain("content-length: 1000");
      const body = exchange.text.slice(exchange.text.indexOf("\r\n\r\n") + 4);
      expect(body.length).toBeLessThan(1000);
      const log = requestLogs(proxy).at(-1)!;
      expect(log.errorCode).toBe(code);
      expect(log.status).toBe(200);
    },
  );

  it("a client that disconnects mid-download aborts the upstream request, nothing leaks", async () => {
    const fdsBefore = readdirSync("/proc/self/fd").length;
    const openBefore = good.openSockets();
    await new Promise<void>((resolve) => {
      const socket = connect(proxy.port, "127.0.0.1", () => {
        socket.write("GET /good/download/104857600 HTTP/1.1\r\nHost: x\r\n\r\n");
      });
      let received = 0;
      socket.on("data", (chunk) => {
        received += chunk.length;
        if (received > 256 * 1024) {
          socket.destroy();
          resolve();
        }
      });
    });
    await waitFor(() => proxy.listeners[0]!.proxy.inFlight() === 0);
    // The upstream connection carrying the aborted download is closed, not left streaming.
    await waitFor(() => good.openSockets() <= openBefore);
    const log = requestLogs(proxy).at(-1)!;
    expect(log.errorCode).toBe("client_closed");
    expect(log.status).toBe(200); // what the client had been told before it left
    await waitFor(() => readdirSync("/proc/self/fd").length <= fdsBefore + 2);
  });

  it("keeps serving after all of the above", async () => {
    const answer = await get("/good/echo/after");
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text).url).toBe("/echo/after");
    expect(proxy.listeners[0]!.proxy.inFlight()).toBe(0);
  });

  it("counts errors by upstream and code", async () => {
    const metric = await proxy.metrics.errorsTotal.get();
    const count = (upstream: string, code: string) =>
      metric.values.find((v) => v.labels.upstream === upstream && v.labels.code === code)?.value;
    expect(count("refused", "upstream_unreachable")).toBe(1);
    expect(count("other-ca", "upstream_tls_error")).toBe(1);
    expect(count("good", "upstream_timeout")).toBeGreaterThanOrEqual(1);
  });
});

async function waitFor(condition: () => boolean, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}
