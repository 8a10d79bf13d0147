/**
 * Issue 26, `scope: shared` on Redis Cluster: a budget's keys share one hash slot, so the
 * scripts run on one node whichever node owns it, and two replicas hold the combined limit.
 */
import { createCluster } from "redis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSharedPacer, type PacingRedis } from "../../src/pacing/shared-pacer.js";
import { maxInAnyWindow } from "../helpers/limited-upstream.js";
import { skipWithoutRedis } from "../helpers/redis-server.js";
import { type RedisClusterSetup, startRedisCluster } from "../helpers/redis-topologies.js";

describe.skipIf(skipWithoutRedis)("shared pacer on Redis Cluster", () => {
  let cluster: RedisClusterSetup;
  const clients: PacingRedis[] = [];
  const closers: (() => void)[] = [];
  beforeAll(async () => {
    cluster = await startRedisCluster();
    for (let i = 0; i < 2; i++) {
      const client = createCluster({
        rootNodes: [{ url: cluster.urls[i]! }],
        defaults: { disableOfflineQueue: true },
      });
      client.on("error", () => {});
      await client.connect();
      clients.push(client as unknown as PacingRedis);
      closers.push(() => client.destroy());
    }
  }, 40_000);
  afterAll(async () => {
    for (const close of closers) close();
    await cluster?.stop();
  });

  it("paces callers whose keys live on different nodes, within the limit each", async () => {
    const prefix = `bp-test-${Math.random().toString(36).slice(2)}:pace:reports:`;
    const replicas = clients.map((client) =>
      createSharedPacer({
        // A margin for the lag of a machine the whole suite shares (burst-against-rolling-limit).
        rate: { requests: 20, perMs: 1_000, burst: 3, marginMs: 300 },
        waitMs: 5_000,
        redis: () => client,
        keyPrefix: prefix,
        commandTimeoutMs: 5_000,
      }),
    );
    const callers = ["alice", "bob", "carol", "dave", "erin", "frank"];
    const departures = new Map<string, number[]>(callers.map((c) => [c, []]));
    await Promise.all(
      Array.from({ length: 180 }, async (_, i) => {
        const caller = callers[i % callers.length]!;
        const admission = await replicas[i % 2]!.acquire(caller);
        expect(admission.ok).toBe(true);
        departures.get(caller)!.push(performance.now());
      }),
    );
    for (const pacer of replicas) {
      expect(pacer.state().degraded).toBe(false);
      pacer.close();
    }
    for (const times of departures.values()) {
      expect(times).toHaveLength(30);
      expect(maxInAnyWindow(times, 1_000)).toBeLessThanOrEqual(20);
    }
  });
});
