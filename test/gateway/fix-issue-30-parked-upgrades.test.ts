import type { IncomingHttpHeaders } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import { metricsText, metricValue, send, upstreamEntry } from "../pacing/support/gateway.js";
import { startWsUpstream, type WsUpstream } from "../protocol/ws-upstream.js";

/**
 * Issue 30 item 3, for WebSocket handshakes: they pass the same pacing gate as plain requests,
 * and waiting for a turn they used to hold a `limits.maxUpgrades` slot, so a few parked
 * handshakes on one rate-limited route refused every other upstream's upgrades with 503
 * `too_many_upgrades`. Now a waiting handshake is out of `maxUpgrades` and holds a place in the
 * same waiting room as plain requests (`limits.maxWaiting`; beyond: 429 `rate_limited` at
 * once). When its turn comes it must find a `maxUpgrades` slot again: an upgraded connection
 * lives for minutes and `maxUpgrades` is all that bounds them, so with none free it is answered
 * 503 `too_many_upgrades` (unlike a plain request, which is admitted over `maxInFlight`).
 */

interface PendingHandshake {
  ws: WebSocket;
  /** 101, or the status of the answer that came instead; rejects if the connection fails. */
  answer: Promise<{ status: number; headers: IncomingHttpHeaders; text: string }>;
}

function startHandshake(url: string, localAddress = "127.0.0.1"): PendingHandshake {
  const ws = new WebSocket(url, { perMessageDeflate: false, localAddress });
  const answer = new Promise<{ status: number; headers: IncomingHttpHeaders; text: string }>(
    (resolve, reject) => {
      let headers: IncomingHttpHeaders = {};
      ws.on("upgrade", (res) => {
        headers = res.headers;
      });
      ws.on("open", () => resolve({ status: 101, headers, text: "" }));
      ws.on("error", reject);
      ws.on("unexpected-response", (_req, res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
      });
    },
  );
  // A handshake the test abandons rejects; nobody waits for it then.
  answer.catch(() => {});
  return { ws, answer };
}

async function waitingRequests(adminUrl: string): Promise<number> {
  const answer = await send(`${adminUrl}/status?limit=1`, {
    headers: { accept: "application/json" },
  });
  return (JSON.parse(answer.text) as { waiting: { requests: number } }).waiting.requests;
}

describe("WebSocket handshakes waiting for a turn", () => {
  let emulator: Emulator;
  let upstream: WsUpstream;
  let gateway: AppUnderTest;
  const opened: WebSocket[] = [];
  const wsUrl = (path: string) => `${gateway.url.replace("http:", "ws:")}${path}`;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    upstream = await startWsUpstream({ cert: pki.good });
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        limits: { maxUpgrades: 3, maxWaiting: 10, maxWaitingPerCaller: 10 },
        upstreams: [
          // One handshake per 30 minutes, waits of days: after the first, every handshake parks.
          upstreamEntry("parked", upstream.origin, emulator, {
            rateLimit: { requests: 1, per: "30m", wait: "500h" },
          }),
          upstreamEntry("turn", upstream.origin, emulator, {
            rateLimit: { requests: 1, per: "6s", wait: "1m" },
          }),
          upstreamEntry("open", upstream.origin, emulator),
        ],
      },
    });
  }, 30_000);

  afterAll(async () => {
    for (const ws of opened) ws.terminate();
    await gateway?.close();
    await Promise.all([upstream?.close(), emulator?.close()]);
  });

  async function open(path: string): Promise<WebSocket> {
    const pending = startHandshake(wsUrl(path));
    opened.push(pending.ws);
    const answer = await pending.answer;
    expect(answer.status, answer.text).toBe(101);
    return pending.ws;
  }

  async function upgradesOpen(): Promise<number> {
    return metricValue(await metricsText(gateway.adminUrl), "bearer_proxy_upgrades_open");
  }

  it("are out of maxUpgrades while they wait, and bounded by maxWaiting", async () => {
    // The route's one turn of the half hour.
    (await open("/parked/chat")).terminate();
    await waitFor(async () => (await upgradesOpen()) === 0, "the first connection closed");

    const parked = Array.from({ length: 10 }, () => startHandshake(wsUrl("/parked/chat")));
    await waitFor(
      async () => (await waitingRequests(gateway.adminUrl)) === 10,
      "ten handshakes parked",
      15_000,
    );
    // Ten wait, maxUpgrades is 3: another upstream's handshake still opens.
    const other = await open("/open/chat");
    expect(await upgradesOpen()).toBe(1);
    // The room is full: the next handshake is refused at once, without a slot or a turn.
    const refused = await startHandshake(wsUrl("/parked/chat")).answer;
    expect(refused.status).toBe(429);
    expect(refused.headers["bearer-proxy-error"]).toBe("rate_limited");
    expect(refused.text).toContain("limits.maxWaiting (10)");

    // Clients that give up give their places back.
    for (const pending of parked) pending.ws.terminate();
    await waitFor(
      async () => (await waitingRequests(gateway.adminUrl)) === 0,
      "every place given back",
      10_000,
    );
    other.terminate();
    await waitFor(async () => (await upgradesOpen()) === 0, "every connection closed");
  }, 60_000);

  it("one whose turn comes with maxUpgrades full is answered 503 too_many_upgrades", async () => {
    (await open("/turn/chat")).terminate();
    // Its turn is ~6 s away.
    const startMs = performance.now();
    const waiting = startHandshake(wsUrl("/turn/chat"));
    opened.push(waiting.ws);
    await waitFor(
      async () => (await waitingRequests(gateway.adminUrl)) === 1,
      "the handshake parked",
      5_000,
    );
    // Meanwhile three connections take every maxUpgrades slot.
    for (let i = 0; i < 3; i++) await open("/open/chat");
    expect(await upgradesOpen()).toBe(3);
    const answer = await waiting.answer;
    expect(answer.status, answer.text).toBe(503);
    expect(answer.headers["bearer-proxy-error"]).toBe("too_many_upgrades");
    expect(performance.now() - startMs).toBeGreaterThan(3_000);
    expect(await waitingRequests(gateway.adminUrl)).toBe(0);
    expect(await upgradesOpen()).toBe(3);
  }, 30_000);
});
