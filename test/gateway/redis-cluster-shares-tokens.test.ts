/**
 * Issue 18: three proxies (whole apps, in this process) sharing a real three-master Redis Cluster make one token
 * request per credential between them; each credential's token and lock hash to one slot; a
 * master killed mid-test fails no request (local fallback).
 */
import { Agent } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmulator } from "../../src/emulator/emulator.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import type { AppUnderTest } from "../helpers/app-under-test.js";
import { skipWithoutRedis } from "../helpers/redis-server.js";
import {
  type RedisClusterSetup,
  redisCommand,
  startRedisCluster,
} from "../helpers/redis-topologies.js";
import { burst, startReplicas, waitForRedisUp } from "../helpers/replica-traffic.js";

const REPLICAS = 3;
const CREDENTIALS = 4;
const CONCURRENCY = 25;
const PREFIX = "bp-cluster:";

describe.skipIf(skipWithoutRedis)("three replicas sharing a Redis Cluster", () => {
  let emulator: Emulator;
  let cluster: RedisClusterSetup;
  let replicas: AppUnderTest[] = [];
  const agent = new Agent({ connections: CONCURRENCY, pipelining: 0 });
  const clients = Array.from({ length: CREDENTIALS }, (_, i) => ({
    clientId: `client-${i}`,
    clientSecret: `secret-${i}`,
  }));
  const targets = (replica: AppUnderTest) =>
    clients.map((_, i) => ({ proxyUrl: replica.url, host: `u${i}.gateway.test` }));

  beforeAll(async () => {
    emulator = await startEmulator({ host: "127.0.0.1", port: 0, clients });
    cluster = await startRedisCluster();
    replicas = await startReplicas(
      REPLICAS,
      {
        log: { level: "info" },
        tokenCache: {
          redis: { clusterNodes: cluster.urls, keyPrefix: PREFIX, commandTimeout: "2s" },
        },
        upstreams: clients.map((c, i) => ({
          name: `u${i}`,
          baseUrl: emulator.url,
          clientId: c.clientId,
          clientSecret: c.clientSecret,
          match: { hosts: [`u${i}.gateway.test`] },
          // Not the point here: a busy test machine must not turn a slow fetch into a 503.
          token: { prefetch: false, minAgeBeforeInvalidate: "100ms", waitTimeout: "30s" },
        })),
      },
      emulator.caPem,
    );
    for (const replica of replicas) await waitForRedisUp(replica.adminUrl);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.close()));
    await agent.close();
    await cluster?.stop();
    await emulator?.close();
  });

  it(`makes one token request per credential for ${CONCURRENCY} cold requests per upstream on each of ${REPLICAS} replicas`, async () => {
    emulator.resetStats();
    const statuses = (
      await Promise.all(
        replicas.flatMap((r) => targets(r).map((t) => burst(t, CONCURRENCY, agent))),
      )
    ).flat();
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(statuses).toHaveLength(REPLICAS * CREDENTIALS * CONCURRENCY);
    expect(emulator.stats().tokenRequests.total).toBe(CREDENTIALS);
  }, 60_000);

  it("stores each credential's token under a hash tag: its lock key is in the same slot", async () => {
    const tokenKeys = (
      await Promise.all(
        cluster.nodes.map(async (n) =>
          ((await redisCommand(n.port, ["KEYS", `${PREFIX}token:*`])) as string[]).map((key) => ({
            key,
            port: n.port,
          })),
        ),
      )
    ).flat();
    expect(tokenKeys).toHaveLength(CREDENTIALS);
    for (const { key, port } of tokenKeys) {
      const lockKey = key.replace(`${PREFIX}token:`, `${PREFIX}lock:`);
      const [tokenSlot, lockSlot] = await Promise.all(
        [key, lockKey].map((k) => redisCommand(port, ["CLUSTER", "KEYSLOT", k])),
      );
      expect(lockSlot).toBe(tokenSlot);
      expect(key).toMatch(/^bp-cluster:token:\{[0-9a-f]+\}$/);
    }
  });

  it("keeps answering when a master is killed, fetching tokens locally", async () => {
    await cluster.nodes[0]!.kill();
    await new Promise((r) => setTimeout(r, 200)); // older than minAgeBeforeInvalidate
    emulator.revokeAllTokens();
    emulator.resetStats();
    const statuses = (
      await Promise.all(replicas.flatMap((r) => targets(r).map((t) => burst(t, 10, agent))))
    ).flat();
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    // Credentials on the surviving masters are still shared; those on the dead one are fetched
    // by each replica: never more than one request per credential and replica.
    const tokenRequests = emulator.stats().tokenRequests.total;
    expect(tokenRequests).toBeGreaterThanOrEqual(CREDENTIALS);
    expect(tokenRequests).toBeLessThanOrEqual(CREDENTIALS * REPLICAS);
  }, 60_000);
});
