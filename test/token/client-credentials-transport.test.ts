import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { Agent } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { BearerProxyError } from "../../src/errors.js";
import { requestToken } from "../../src/token/client-credentials.js";
import { makeSpec, TEST_SECRET } from "./helpers.js";

// Real sockets on 127.0.0.1 (plain http with allowInsecureHttp: the transport failures, not TLS).
let server: Server | undefined;
let agent: Agent | undefined;
const sockets = new Set<Socket>();

afterEach(async () => {
  await agent?.close();
  for (const socket of sockets) socket.destroy();
  sockets.clear();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
  agent = undefined;
});

async function serve(handler: Parameters<typeof createServer>[1]): Promise<string> {
  server = createServer(handler);
  server.on("connection", (socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
}

async function fetchError(tokenUrl: string, timeoutMs = 300): Promise<BearerProxyError> {
  agent = new Agent();
  const spec = makeSpec({ tokenUrl: `${tokenUrl}?tenant=secret-q`, allowInsecureHttp: true });
  const error = await requestToken(
    spec,
    { clientId: "demo-client", clientSecret: TEST_SECRET },
    { dispatcher: agent, timeoutMs },
  ).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(BearerProxyError);
  const bpe = error as BearerProxyError;
  expect(bpe.message).not.toContain(TEST_SECRET);
  expect(bpe.message).not.toContain("secret-q"); // the query is never shown
  return bpe;
}

describe("token endpoint transport failures", () => {
  it("a server that never answers: timeout within the bound", async () => {
    const url = await serve(() => {});
    const started = performance.now();
    const error = await fetchError(url, 300);
    const elapsed = performance.now() - started;
    expect(error.code).toBe("BP_ERR_TOKEN_TIMEOUT");
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(2_000);
  });

  it("a body that stalls after the headers: timeout covers the body too", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write('{"access_token":');
    });
    expect((await fetchError(url, 300)).code).toBe("BP_ERR_TOKEN_TIMEOUT");
  });

  it("a connection reset before the response: network error with cause", async () => {
    const url = await serve((req) => req.socket.destroy());
    const error = await fetchError(url);
    expect(error.code).toBe("BP_ERR_TOKEN_NETWORK");
    expect(error.cause).toBeDefined();
  });

  it("a reset in the middle of the body: network error", async () => {
    const url = await serve((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": "500" });
      res.write('{"access_token":"abc');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    expect((await fetchError(url)).code).toBe("BP_ERR_TOKEN_NETWORK");
  });

  it("connection refused: network error naming the endpoint", async () => {
    const url = await serve(() => {});
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    server = undefined;
    const error = await fetchError(url);
    expect(error.code).toBe("BP_ERR_TOKEN_NETWORK");
    expect(error.message).toContain("ECONNREFUSED");
    expect(error.message).toContain(url);
  });

  it("a caller abort rejects with the caller's reason, not a token error", async () => {
    const url = await serve(() => {});
    agent = new Agent();
    const controller = new AbortController();
    const pending = requestToken(
      makeSpec({ tokenUrl: url, allowInsecureHttp: true }),
      { clientId: "a", clientSecret: "b" },
      { dispatcher: agent, timeoutMs: 5_000, signal: controller.signal },
    );
    const reason = new Error("caller gave up");
    setTimeout(() => controller.abort(reason), 20);
    await expect(pending).rejects.toBe(reason);
  });
});
