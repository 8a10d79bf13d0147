import type { IncomingMessage } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { createTestPki } from "../helpers/tls.js";
import { startTestProxy, type TestProxy } from "../proxy/harness.js";
import { createStubTokens } from "../proxy/stub-tokens.js";
import { headerValues, startWsUpstream, type WsUpstream } from "./ws-upstream.js";

/**
 * Issue 15 item 5 in HTTP_PROXY mode: the client names the upstream by an absolute-form target
 * (`GET http://api.test/ws HTTP/1.1`), as a client configured with an HTTP proxy does for plain
 * ws:// URLs. The `ws` client is made to send that form by rewriting its request path before
 * the request head is written (its `finishRequest` hook).
 */

function viaProxy(
  proxyPort: number,
  target: string,
): Promise<{
  ws?: WebSocket;
  status?: number;
  error?: string;
  headers?: IncomingMessage["headers"];
}> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${proxyPort}/unused`, {
      finishRequest: (request) => {
        request.path = target;
        request.end();
      },
    });
    ws.on("open", () => resolve({ ws }));
    ws.on("error", (err) => resolve({ error: err.message }));
    ws.on("unexpected-response", (_req, res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0, headers: res.headers });
    });
  });
}

describe("WebSocket through the proxy in HTTP_PROXY mode (absolute-form)", () => {
  let upstream: WsUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startWsUpstream({ cert: pki.good });
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { api: createStubTokens("proxy-mode") },
      config: {
        upstreams: [{ name: "api", baseUrl: upstream.origin, match: { hosts: ["api.test"] } }],
      },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  it("routes by the target's authority, injects the token and echoes", async () => {
    const { ws, error } = await viaProxy(proxy.port, "http://api.test/socket?x=1");
    expect(error).toBeUndefined();
    const handshake = upstream.handshakes.at(-1)!;
    expect(handshake.url).toBe("/socket?x=1");
    expect(headerValues(handshake.headers, "authorization")).toEqual(["Bearer proxy-mode-1"]);
    expect(headerValues(handshake.headers, "host")).toEqual([new URL(upstream.origin).host]);
    const echoed = new Promise<string>((r) => ws!.once("message", (d: Buffer) => r(d.toString())));
    ws!.send("proxied");
    expect(await echoed).toBe("proxied");
    ws!.close();
  });

  it("a host no upstream serves is refused with 403 host_not_allowed", async () => {
    const before = upstream.handshakes.length;
    const outcome = await viaProxy(proxy.port, "http://elsewhere.test/socket");
    expect(outcome.status).toBe(403);
    expect(outcome.headers?.["bearer-proxy-error"]).toBe("host_not_allowed");
    expect(upstream.handshakes.length).toBe(before);
  });
});
