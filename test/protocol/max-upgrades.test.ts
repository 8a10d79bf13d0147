import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { requestLogs, startTestProxy, type TestProxy } from "../proxy/harness.js";
import { createStubTokens } from "../proxy/stub-tokens.js";
import { eventually, startWsUpstream, type WsUpstream } from "./ws-upstream.js";

/**
 * Issue 22 item 4: upgraded connections are long-lived and outside limits.maxInFlight, so they
 * have their own process-wide cap: past limits.maxUpgrades an Upgrade gets 503
 * too_many_upgrades with Retry-After, and a closed one frees its slot.
 */

function open(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.on("open", () => resolve(ws));
    ws.on("error", reject);
    ws.on("unexpected-response", (_req, res) => reject(new Error(`status ${res.statusCode}`)));
  });
}

function refused(
  url: string,
): Promise<{ status: number; retryAfter: string | undefined; body: string }> {
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
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          retryAfter: res.headers["retry-after"] as string | undefined,
          body,
        }),
      );
    });
  });
}

async function gauge(proxy: TestProxy): Promise<number> {
  const metric = await proxy.metrics.registry.getSingleMetric("bearer_proxy_upgrades_open")!.get();
  return metric.values[0]?.value ?? 0;
}

describe("limits.maxUpgrades", () => {
  let pki: TestPki;
  let upstream: WsUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    pki = await createTestPki();
    upstream = await startWsUpstream({ cert: pki.good, authorize: () => true });
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { ws: createStubTokens("ws-token") },
      config: {
        limits: { maxUpgrades: 2 },
        upstreams: [{ name: "ws", baseUrl: upstream.origin }],
      },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  it("refuses the upgrade over the limit with 503 too_many_upgrades, and a closed one frees a slot", async () => {
    const first = await open(`ws://127.0.0.1:${proxy.port}/ws/1`);
    const second = await open(`ws://127.0.0.1:${proxy.port}/ws/2`);
    expect(await gauge(proxy)).toBe(2);
    const before = upstream.handshakes.length;

    const third = await refused(`ws://127.0.0.1:${proxy.port}/ws/3`);
    expect(third.status).toBe(503);
    expect(third.retryAfter).toBe("1");
    expect(JSON.parse(third.body).error).toMatchObject({
      code: "too_many_upgrades",
      upstream: "ws",
    });
    expect(upstream.handshakes.length).toBe(before);

    first.close();
    await eventually(() => proxy.lifecycle.upgrades.inFlight === 1, 5_000, "a slot freed");
    expect(await gauge(proxy)).toBe(1);
    const fourth = await open(`ws://127.0.0.1:${proxy.port}/ws/4`);
    expect(await gauge(proxy)).toBe(2);
    fourth.close();
    second.close();
    await eventually(() => proxy.lifecycle.upgrades.inFlight === 0, 5_000, "every slot freed");
    expect(await gauge(proxy)).toBe(0);
    expect(requestLogs(proxy).find((l) => l.path === "/ws/3")).toMatchObject({
      status: 503,
      errorCode: "too_many_upgrades",
    });
  });
});
