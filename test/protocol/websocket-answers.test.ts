import type { IncomingMessage } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { closedPort, type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { requestLogs, startTestProxy, type TestProxy } from "../proxy/harness.js";
import { createStubTokens, type StubTokens, tokenUnavailable } from "../proxy/stub-tokens.js";
import {
  eventually,
  HANDSHAKE,
  headerValues,
  startWsUpstream,
  type WsUpstream,
} from "./ws-upstream.js";

/**
 * Issue 15 item 5: every answer but 101 to an Upgrade request — an upstream 401 (new token, one
 * replay), other upstream statuses relayed as they are, and the proxy's own coded errors when it
 * refuses or can't reach the upstream.
 */

interface Outcome {
  status: number;
  headers: IncomingMessage["headers"];
  body: string;
}

/** A ws handshake that must not succeed: the answer the client got instead. */
function refusedHandshake(url: string): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.on("open", () => reject(new Error("the handshake succeeded")));
    ws.on("error", () => {});
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
  });
}

function open(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.on("open", () => resolve(ws));
    ws.on("error", reject);
    ws.on("unexpected-response", (_req, res) => reject(new Error(`status ${res.statusCode}`)));
  });
}

describe("answers to Upgrade requests other than 101", () => {
  let pki: TestPki;
  let upstream: WsUpstream;
  let plain: FakeUpstream;
  let proxy: TestProxy;
  let tokens: StubTokens;
  let downTokens: StubTokens;
  /** Token values the ws server accepts; anything else gets 401. */
  const accepted = new Set<string>(["Bearer ws-token-2"]);

  beforeAll(async () => {
    pki = await createTestPki();
    upstream = await startWsUpstream({
      cert: pki.good,
      authorize: (req: IncomingMessage) => {
        if (req.url?.startsWith("/ws/forbidden")) return 403;
        return accepted.has(req.headers.authorization ?? "") ? true : 401;
      },
    });
    plain = await startFakeUpstream({ cert: pki.good });
    tokens = createStubTokens("ws-token");
    downTokens = createStubTokens("down-token");
    downTokens.failWith(tokenUnavailable(7));
    const refused = await closedPort();
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: {
        ws: tokens,
        closed: createStubTokens(),
        plain: createStubTokens(),
        slow: createStubTokens(),
        down: downTokens,
        gone: createStubTokens(),
      },
      config: {
        upstreams: [
          {
            name: "ws",
            baseUrl: upstream.origin,
            match: { pathPrefix: "/ws" },
            token: { minAgeBeforeInvalidate: "0ms" },
          },
          {
            name: "closed",
            baseUrl: upstream.origin,
            match: { pathPrefix: "/closed" },
            upgrades: [],
          },
          { name: "plain", baseUrl: plain.origin, match: { pathPrefix: "/echo" } },
          { name: "slow", baseUrl: plain.origin, match: { pathPrefix: "/slow-headers" } },
          { name: "down", baseUrl: upstream.origin, match: { pathPrefix: "/down" } },
          {
            name: "gone",
            baseUrl: `https://127.0.0.1:${refused}`,
            match: { pathPrefix: "/gone" },
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
    await plain.close();
  });

  it("an upstream 401 gets one new token and one replay; the client sees only the 101", async () => {
    const before = upstream.handshakes.length;
    const ws = await open(`ws://127.0.0.1:${proxy.port}/ws/replayed`);
    const seen = upstream.handshakes.slice(before);
    expect(seen.map((h) => headerValues(h.headers, "authorization")[0])).toEqual([
      "Bearer ws-token-1",
      "Bearer ws-token-2",
    ]);
    expect(tokens.invalidations).toBe(1);
    const echoed = new Promise<string>((r) => ws.once("message", (d: Buffer) => r(d.toString())));
    ws.send("after the replay");
    expect(await echoed).toBe("after the replay");
    ws.close();
    await eventually(
      () => requestLogs(proxy).some((l) => l.path === "/ws/replayed"),
      5_000,
      "access line",
    );
    expect(requestLogs(proxy).find((l) => l.path === "/ws/replayed")).toMatchObject({
      status: 101,
      replayed: true,
    });
  });

  it("a second 401 reaches the client unchanged", async () => {
    accepted.clear();
    try {
      const before = upstream.handshakes.length;
      const outcome = await refusedHandshake(`ws://127.0.0.1:${proxy.port}/ws/still-401`);
      expect(outcome.status).toBe(401);
      expect(outcome.headers["x-upstream-reason"]).toBe("status-401");
      expect(outcome.headers["bearer-proxy-error"]).toBeUndefined();
      expect(upstream.handshakes.length - before).toBe(2);
    } finally {
      accepted.add(`Bearer ws-token-${tokens.fetches}`);
    }
  });

  it("another upstream status is relayed as a normal response, body included", async () => {
    const outcome = await refusedHandshake(`ws://127.0.0.1:${proxy.port}/ws/forbidden`);
    expect(outcome.status).toBe(403);
    expect(outcome.headers["x-upstream-reason"]).toBe("status-403");
    expect(outcome.headers["bearer-proxy-error"]).toBeUndefined();
    expect(outcome.body).toBe("Refused");
    expect(outcome.headers.connection).toBe("close");
  });

  it("upgrades: [] refuses WebSocket with 501 upgrade_not_allowed; nothing reaches the upstream", async () => {
    const before = upstream.handshakes.length;
    const outcome = await refusedHandshake(`ws://127.0.0.1:${proxy.port}/closed/x`);
    expect(outcome.status).toBe(501);
    expect(outcome.headers["bearer-proxy-error"]).toBe("upgrade_not_allowed");
    expect(JSON.parse(outcome.body)).toMatchObject({
      error: { code: "upgrade_not_allowed", upstream: "closed" },
    });
    expect(upstream.handshakes.length).toBe(before);
  });

  it("an Upgrade to a protocol the upstream doesn't list is ignored: a plain request (RFC 9110 §7.8)", async () => {
    const exchange = await rawRequest(
      proxy.port,
      "GET /echo/h2c HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\n" +
        "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n",
    );
    expect(exchange.responses[0]?.status).toBe(200);
    const echo = JSON.parse(exchange.responses[0]!.body) as { headers: [string, string][] };
    expect(headerValues(echo.headers, "upgrade")).toEqual([]);
    expect(headerValues(echo.headers, "http2-settings")).toEqual([]);
    expect(headerValues(echo.headers, "authorization")).toEqual(["Bearer stub-token-1"]);
    expect(exchange.closed).toBe(true);
  });

  it("no token: 503 token_unavailable with Retry-After, written on the connection", async () => {
    const exchange = await rawRequest(proxy.port, `GET /down/x HTTP/1.1\r\n${HANDSHAKE}`);
    const response = exchange.responses[0]!;
    expect(response.status).toBe(503);
    expect(response.headers.get("bearer-proxy-error")).toEqual(["token_unavailable"]);
    expect(response.headers.get("retry-after")).toEqual(["7"]);
    expect(exchange.closed).toBe(true);
  });

  it("an unreachable upstream: 502 upstream_unreachable", async () => {
    const outcome = await refusedHandshake(`ws://127.0.0.1:${proxy.port}/gone/x`);
    expect(outcome.status).toBe(502);
    expect(outcome.headers["bearer-proxy-error"]).toBe("upstream_unreachable");
  });

  it("the guards apply: a dot-segment gets 400, no route gets 404", async () => {
    const dots = await rawRequest(proxy.port, `GET /ws/%2e%2e/admin HTTP/1.1\r\n${HANDSHAKE}`);
    expect(dots.responses[0]?.status).toBe(400);
    expect(dots.responses[0]?.headers.get("bearer-proxy-error")).toEqual(["bad_request"]);
    const none = await rawRequest(proxy.port, `GET /nowhere HTTP/1.1\r\n${HANDSHAKE}`);
    expect(none.responses[0]?.status).toBe(404);
    expect(none.responses[0]?.headers.get("bearer-proxy-error")).toEqual(["no_route"]);
  });

  it("an Upgrade request with a body is refused", async () => {
    const exchange = await rawRequest(
      proxy.port,
      `POST /ws/body HTTP/1.1\r\nContent-Length: 2\r\n${HANDSHAKE}ab`,
    );
    expect(exchange.responses[0]?.status).toBe(400);
  });

  it("an Upgrade pipelined behind a slow request is answered after it, never inside it", async () => {
    const exchange = await rawRequest(
      proxy.port,
      "GET /slow-headers/300 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" +
        `GET /ws/pipelined HTTP/1.1\r\nAuthorization: x\r\n${HANDSHAKE}`,
      // The tunnel stays open after its 101: done once both answers are in.
      { timeoutMs: 15_000, until: (responses) => responses.length === 2 },
    );
    const [first, second] = exchange.responses;
    expect(first?.status).toBe(200);
    expect(first?.body).toBe("late");
    expect(second?.status).toBe(101);
  });
});
