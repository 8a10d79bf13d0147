import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { requestLogs, startTestProxy, type TestProxy } from "../proxy/harness.js";
import { createStubTokens, type StubTokens } from "../proxy/stub-tokens.js";
import { eventually, headerValues, startWsUpstream, type WsUpstream } from "./ws-upstream.js";

/**
 * Issue 15 item 5: a real `ws` client through the proxy to a real `ws` server behind TLS —
 * credentials injected on the handshake, messages echoed both ways, closes passed on in both
 * directions, an idle timeout, a client that vanishes mid-stream, one access line per upgrade.
 */

function open(url: string, headers: Record<string, string> = {}): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    ws.on("open", () => resolve(ws));
    ws.on("error", reject);
    ws.on("unexpected-response", (_req, res) => reject(new Error(`status ${res.statusCode}`)));
  });
}

function nextMessage(ws: WebSocket): Promise<Buffer> {
  return new Promise((resolve) =>
    ws.once("message", (data: Buffer | Buffer[]) =>
      resolve(Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data)),
    ),
  );
}

function closed(ws: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) =>
    ws.once("close", (code: number, reason: Buffer) =>
      resolve({ code, reason: reason.toString() }),
    ),
  );
}

describe("WebSocket relay with injected credentials", () => {
  let pki: TestPki;
  let upstream: WsUpstream;
  let proxy: TestProxy;
  let tokens: StubTokens;
  let idleTokens: StubTokens;

  beforeAll(async () => {
    pki = await createTestPki();
    upstream = await startWsUpstream({ cert: pki.good });
    tokens = createStubTokens("ws-token");
    idleTokens = createStubTokens("idle-token");
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { ws: tokens, idle: idleTokens },
      config: {
        // Node's own header timeout must not end an upgraded connection.
        limits: { headersTimeout: "1s" },
        upstreams: [
          {
            name: "ws",
            baseUrl: upstream.origin,
            apiVersion: "scripting-preview",
            match: { pathPrefix: "/ws" },
          },
          {
            name: "idle",
            baseUrl: upstream.origin,
            match: { pathPrefix: "/idle" },
            // Proxy, upstream and client share this event loop: a stall on a loaded machine is
            // silence to the relay, so the idle time is well above any stall we expect.
            timeouts: { upgradeIdle: "1s" },
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  it("injects Authorization and X-Version on the handshake and echoes text and binary", async () => {
    const ws = await open(`ws://127.0.0.1:${proxy.port}/ws/chat?room=1`, {
      Authorization: "Basic Y2xpZW50OnNlY3JldA==",
      "X-Version": "1999-01-01",
      "X-Client": "kept",
    });
    const handshake = upstream.handshakes.at(-1)!;
    expect(handshake.url).toBe("/ws/chat?room=1");
    expect(headerValues(handshake.headers, "authorization")).toEqual(["Bearer ws-token-1"]);
    expect(headerValues(handshake.headers, "x-version")).toEqual(["2026-09-01.scripting.preview"]);
    expect(headerValues(handshake.headers, "x-client")).toEqual(["kept"]);
    expect(headerValues(handshake.headers, "host")).toEqual([new URL(upstream.origin).host]);
    expect(headerValues(handshake.headers, "upgrade")).toEqual(["websocket"]);
    expect(headerValues(handshake.headers, "sec-websocket-key")).toHaveLength(1);

    const text = nextMessage(ws);
    ws.send("hello through the proxy");
    expect((await text).toString()).toBe("hello through the proxy");
    // 4 MiB both ways: more than any socket buffer, so backpressure has to work.
    const big = Buffer.alloc(4 * 1024 * 1024, 7);
    const echoed = nextMessage(ws);
    ws.send(big, { binary: true });
    expect((await echoed).equals(big)).toBe(true);
    const done = closed(ws);
    ws.close(1000, "bye");
    await done;
  });

  it("relays the 101's own headers to the client", async () => {
    const headers = await new Promise<Record<string, string | string[] | undefined>>(
      (resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${proxy.port}/ws/h`);
        ws.on("upgrade", (res) => resolve(res.headers));
        ws.on("open", () => ws.close());
        ws.on("error", reject);
      },
    );
    expect(headers["x-upstream-handshake"]).toBe("yes");
    expect(headers.upgrade).toBe("websocket");
    expect(headers.connection?.toString().toLowerCase()).toBe("upgrade");
  });

  it("a client close reaches the server with its code and reason; both connections end; one access line", async () => {
    const before = upstream.closes.length;
    const ws = await open(`ws://127.0.0.1:${proxy.port}/ws/close-from-client`);
    const echoed = nextMessage(ws);
    ws.send("x".repeat(1000));
    await echoed;
    const done = closed(ws);
    ws.close(4000, "client done");
    expect(await done).toEqual({ code: 4000, reason: "client done" });
    await eventually(() => upstream.closes.length > before, 5_000, "server close");
    expect(upstream.closes.at(-1)).toEqual({ code: 4000, reason: "client done" });
    await eventually(() => upstream.openSockets() === 0, 5_000, "upstream sockets closed");
    await eventually(
      () => requestLogs(proxy).some((l) => l.path === "/ws/close-from-client"),
      5_000,
      "access line",
    );
    const line = requestLogs(proxy).find((l) => l.path === "/ws/close-from-client")!;
    expect(line).toMatchObject({ upstream: "ws", method: "GET", status: 101, replayed: false });
    expect(line.errorCode).toBeUndefined();
    // 1000 bytes of payload plus framing each way (the client's frames are masked: larger).
    expect(line.bytesIn as number).toBeGreaterThan(1000);
    expect(line.bytesOut as number).toBeGreaterThan(1000);
    expect(line.durationMs as number).toBeGreaterThan(0);
    const total = await proxy.metrics.registry.getSingleMetricAsString(
      "bearer_proxy_requests_total",
    );
    expect(total).toMatch(/upstream="ws",method="GET",status_class="1xx"} [1-9]/);
  });

  it("a server close reaches the client with its code and reason", async () => {
    const ws = await open(`ws://127.0.0.1:${proxy.port}/ws/close-from-server`);
    const done = closed(ws);
    upstream.connections.at(-1)!.close(4001, "server done");
    expect(await done).toEqual({ code: 4001, reason: "server done" });
  });

  it("a client that vanishes mid-stream ends the upstream connection; the proxy keeps serving", async () => {
    const before = upstream.closes.length;
    const ws = await open(`ws://127.0.0.1:${proxy.port}/ws/vanish`);
    ws.send(Buffer.alloc(256 * 1024, 1));
    ws.terminate();
    await eventually(() => upstream.closes.length > before, 5_000, "server saw the close");
    expect(upstream.closes.at(-1)!.code).toBe(1006);
    await eventually(() => upstream.openSockets() === 0, 5_000, "upstream sockets closed");
    const again = await open(`ws://127.0.0.1:${proxy.port}/ws/after-vanish`);
    const echoed = nextMessage(again);
    again.send("still here");
    expect((await echoed).toString()).toBe("still here");
    again.close();
  });

  it("outlives Node's header timeout while idle below upgradeIdle", async () => {
    const ws = await open(`ws://127.0.0.1:${proxy.port}/ws/quiet`);
    await new Promise((r) => setTimeout(r, 2_500));
    expect(ws.readyState).toBe(WebSocket.OPEN);
    const echoed = nextMessage(ws);
    ws.send("after a quiet spell");
    expect((await echoed).toString()).toBe("after a quiet spell");
    ws.close();
  });

  it("traffic keeps a connection open; upgradeIdle of silence closes both sides", async () => {
    const before = upstream.closes.length;
    const ws = await open(`ws://127.0.0.1:${proxy.port}/idle/x`);
    const done = closed(ws);
    // 3 s of traffic (3× upgradeIdle), a message every 100 ms: never 1 s idle. A relay that
    // did not count traffic as activity would close it at 1 s.
    const trafficStarted = performance.now();
    for (let i = 0; i < 30; i++) {
      const echoed = nextMessage(ws);
      ws.send(`ping ${i}`);
      // A tunnel that dies here fails now, with the reason, not at the test's timeout.
      const early = await Promise.race([echoed.then(() => undefined), done]);
      if (early !== undefined) {
        const afterMs = Math.round(performance.now() - trafficStarted);
        expect.fail(`tunnel closed (${early.code}) at ping ${i}, ${afterMs} ms into the traffic`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(ws.readyState).toBe(WebSocket.OPEN);
    // Then silence: upgradeIdle is 1 s; a relay without an idle timer keeps it open for good,
    // which fails here after 5 s, not at the test's timeout.
    let giveUp: NodeJS.Timeout | undefined;
    const silenceEnded = await Promise.race([
      done,
      new Promise<undefined>((resolve) => {
        giveUp = setTimeout(() => resolve(undefined), 5_000);
      }),
    ]);
    clearTimeout(giveUp);
    expect(silenceEnded, "no close within 5 s of silence").toBeDefined();
    expect(silenceEnded!.code).toBe(1006);
    await eventually(() => upstream.closes.length > before, 5_000, "server saw the close");
  });
});

describe("shutdown with upgraded connections open", () => {
  it("close() ends them when its grace period is over, and returns", async () => {
    const pki = await createTestPki();
    const upstream = await startWsUpstream({ cert: pki.good });
    const proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { ws: createStubTokens() },
      config: { upstreams: [{ name: "ws", baseUrl: upstream.origin }] },
    });
    try {
      const ws = await open(`ws://127.0.0.1:${proxy.port}/ws`);
      const done = closed(ws);
      const started = Date.now();
      // The harness gives in-flight work 1 s.
      await proxy.close();
      expect(Date.now() - started).toBeLessThan(5_000);
      expect((await done).code).toBe(1006);
      await eventually(() => upstream.openSockets() === 0, 5_000, "upstream sockets closed");
    } finally {
      await proxy.close();
      await upstream.close();
    }
  });
});
