/**
 * Issue 6: three proxy processes sharing one Redis make exactly one token request between them
 * for 500 concurrent cold requests each; killing Redis mid-test fails no request.
 */
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmulator } from "../../src/emulator/emulator.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type ProxyProcess, startProxyProcesses } from "../helpers/proxy-process.js";
import { type RedisServer, skipWithoutRedis, startRedisServer } from "../helpers/redis-server.js";

const REPLICAS = 3;

async function waitForRedisUp(adminUrl: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const metrics = await (await request(`${adminUrl}/metrics`)).body.text();
    if (/^bearer_proxy_redis_up 1$/m.test(metrics)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${adminUrl}: never connected to Redis`);
}
const CONCURRENCY = 500;

describe.skipIf(skipWithoutRedis)("three replicas sharing Redis", () => {
  let emulator: Emulator;
  let redis: RedisServer;
  let replicas: ProxyProcess[] = [];
  const agent = new Agent({ connections: CONCURRENCY, pipelining: 0 });

  beforeAll(async () => {
    emulator = await startEmulator({ host: "127.0.0.1", port: 0 });
    redis = await startRedisServer();
    const config = `
listen: { host: 127.0.0.1, port: 0 }
admin: { host: 127.0.0.1, port: 0 }
log: { level: info }
shutdown: { drainDelay: 0s, timeout: 2s }
tokenCache:
  redis: { url: "${redis.url}", keyPrefix: "bp-replicas:", commandTimeout: 2s }
upstreams:
  - name: api
    baseUrl: ${emulator.url}
    clientId: demo-client
    clientSecret: demo-secret
    tls: { caFile: ${JSON.stringify(emulator.caFile)} }
    token: { prefetch: false, minAgeBeforeInvalidate: 100ms }
    # 1,500 requests land on one emulator in the test's own process: on a loaded two-core
    # machine a request can wait more than the default 5 s for one of the 128 pooled
    # connections (503 upstream_busy). The test is about token requests, not queueing.
    timeouts: { queue: 60s }
`;
    replicas = await startProxyProcesses(REPLICAS, config);
    // Replicas in a Deployment are connected to Redis long before a burst: wait for that, so the
    // test is about the lock protocol rather than who wins a race with the first connect.
    for (const replica of replicas) await waitForRedisUp(replica.adminUrl);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await agent.close();
    await redis?.stop();
    await emulator?.close();
  });

  async function burst(url: string, count: number): Promise<number[]> {
    return Promise.all(
      Array.from({ length: count }, async () => {
        const response = await request(`${url}/platform/v1/spreadsheets/r`, { dispatcher: agent });
        await response.body.dump();
        return response.statusCode;
      }),
    );
  }

  it(`makes one token request for ${CONCURRENCY} cold concurrent requests to each of ${REPLICAS} replicas`, async () => {
    emulator.resetStats();
    const statuses = (
      await Promise.all(replicas.map((r) => burst(r.proxyUrl, CONCURRENCY)))
    ).flat();
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(statuses).toHaveLength(REPLICAS * CONCURRENCY);
    expect(emulator.stats().tokenRequests.total).toBe(1);
  }, 60_000);

  it("keeps answering when Redis is killed, fetching tokens locally", async () => {
    await redis.kill();
    // Revoke so every replica must get a new token while Redis is gone.
    // (minAgeBeforeInvalidate is 100 ms above, so the just-fetched token may be dropped on 401.)
    await new Promise((r) => setTimeout(r, 200));
    emulator.revokeAllTokens();
    emulator.resetStats();
    const statuses = (await Promise.all(replicas.map((r) => burst(r.proxyUrl, 50)))).flat();
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    // Each replica fetched for itself: one token request per replica, no storm.
    expect(emulator.stats().tokenRequests.total).toBe(REPLICAS);
    const metrics = await (await request(`${replicas[0]!.adminUrl}/metrics`)).body.text();
    expect(metrics).toMatch(/^bearer_proxy_redis_up 0$/m);
  }, 60_000);
});
