import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { connect } from "node:net";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import { requestLogs, startTestProxy, type TestProxy } from "./harness.js";
import { createStubTokens } from "./stub-tokens.js";

/**
 * The proxy listener sets node:http's `optimizeEmptyRequests` (Node 24.12 and later; older Nodes
 * ignore it): a request without Content-Length or Transfer-Encoding has no body, so Node hands it
 * over already ended and skips its stream's 'data'/'end'/'close' life. The proxy must not need
 * those events for such a request: a hang-up is seen on the response, a body still flows when
 * the request has one, and pipelined requests still follow each other.
 */

/** Whether the running Node knows the option: it validates the option's type only if it does. */
function nodeOptimizesEmptyRequests(): boolean {
  try {
    createServer({ optimizeEmptyRequests: "yes" } as never);
    return false;
  } catch {
    return true;
  }
}

describe("requests without a body (optimizeEmptyRequests)", () => {
  let pki: TestPki;
  let upstream: FakeUpstream;
  let proxy: TestProxy;
  /** What Node handed the proxy: was the request's stream already ended? */
  const endedOnArrival: { url: string | undefined; ended: boolean }[] = [];

  beforeAll(async () => {
    pki = await createTestPki();
    upstream = await startFakeUpstream({ cert: pki.good });
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { u: createStubTokens() },
      config: { upstreams: [{ name: "u", baseUrl: upstream.origin }] },
    });
    proxy.listeners[0]!.proxy.server.prependListener("request", (req: IncomingMessage) => {
      endedOnArrival.push({ url: req.url, ended: req.readableEnded });
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it("a bodiless GET arrives ended where Node supports it; one with a body does not", async () => {
    const plain = await request(`${proxy.url}/echo/plain`);
    expect(plain.statusCode).toBe(200);
    await plain.body.dump();
    const withBody = await request(`${proxy.url}/echo/with-body`, {
      method: "POST",
      body: "hello",
    });
    expect(withBody.statusCode).toBe(200);
    const echoed = (await withBody.body.json()) as { bodyLength: number };
    expect(echoed.bodyLength).toBe(5);

    const arrival = (url: string) => endedOnArrival.find((a) => a.url === url)?.ended;
    expect(arrival("/echo/plain")).toBe(nodeOptimizesEmptyRequests());
    expect(arrival("/echo/with-body")).toBe(false);
  });

  it("a client that hangs up on a bodiless GET is logged 499 client_closed, and the upstream request ends", async () => {
    const before = upstream.requests.length;
    // The upstream's side of this request: did its response close before it was written?
    let upstreamAbandoned = false;
    upstream.server.prependListener("request", (req: IncomingMessage, res: ServerResponse) => {
      if (req.url !== "/slow-headers/30000") return;
      res.once("close", () => {
        upstreamAbandoned = !res.writableFinished;
      });
    });
    const socket = connect(proxy.port, "127.0.0.1");
    socket.on("error", () => {});
    socket.write("GET /slow-headers/30000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    await waitFor(() => upstream.requests.length > before, "the request at the upstream", 10_000);
    socket.destroy();

    await waitFor(
      () => requestLogs(proxy).some((l) => l.path === "/slow-headers/30000"),
      "the access line",
      10_000,
    );
    expect(requestLogs(proxy).find((l) => l.path === "/slow-headers/30000")).toMatchObject({
      status: 499,
      errorCode: "client_closed",
    });
    // The proxy abandoned the upstream exchange: the upstream's response closed unwritten.
    await waitFor(() => upstreamAbandoned, "the upstream request to be abandoned", 10_000);
  });

  it("pipelined bodiless requests are all answered, in order", async () => {
    const one = "GET /status/204 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    const last = "GET /status/202 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    const exchange = await rawRequest(proxy.port, one + one + last, { timeoutMs: 10_000 });
    expect(exchange.closed).toBe(true);
    expect(exchange.responses.map((r) => r.status)).toEqual([204, 204, 202]);
  });
});
