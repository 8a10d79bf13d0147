/**
 * Issue 18: a password-protected Redis Cluster. node-redis uses `rootNodes` only to discover the
 * topology and connects to the nodes it finds with `defaults` alone, so the password in the
 * configured URLs must reach every node connection, including nodes not listed in clusterNodes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisTokenCache } from "../../src/token/redis-token-cache.js";
import type { SharedToken, SharedTokenCache } from "../../src/token/shared-token-cache.js";
import {
  issueSharedToken,
  recordingLogger,
  redisCacheConfig,
  skipWithoutRedis,
  useCacheCleanup,
} from "../helpers/redis-server.js";
import { type RedisClusterSetup, startRedisCluster } from "../helpers/redis-topologies.js";

const PASSWORD = "cluster p@ss/word";
const CREDENTIALS = 12;

describe.skipIf(skipWithoutRedis)("redis token cache: a password-protected cluster", () => {
  let cluster: RedisClusterSetup;
  const caches = useCacheCleanup();
  beforeAll(async () => {
    cluster = await startRedisCluster({ password: PASSWORD });
  }, 40_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it("shares tokens for credentials on every node when only one node is listed", async () => {
    const config = redisCacheConfig("", {
      url: undefined,
      clusterNodes: [cluster.urls[0]!],
      commandTimeoutMs: 2_000,
    });
    const log = recordingLogger();
    const make = () => {
      const cache = createRedisTokenCache({ config, logger: log.logger });
      caches.push(cache);
      return cache;
    };
    let fetches = 0;
    const get = (cache: SharedTokenCache, credentialKey: string) =>
      cache.getOrFetch({
        credentialKey,
        secret: "s3cret",
        refreshFraction: 0.75,
        fetchFromIdp: async (): Promise<SharedToken> => issueSharedToken(`token-${++fetches}`),
      });
    const [a, b] = [make(), make()];
    // Twelve credentials spread over the three masters' slots (hex keys hash anywhere).
    const keys = Array.from({ length: CREDENTIALS }, (_, i) => `${i}`.repeat(8));
    for (const key of keys) await get(a, key);
    const fromB = await Promise.all(keys.map((key) => get(b, key)));
    expect(fromB.map((t) => t.accessToken)).toEqual(keys.map((_, i) => `token-${i + 1}`));
    expect(fetches).toBe(CREDENTIALS);
    expect(log.records.filter((r) => r.level === "warn")).toEqual([]);
    // Nothing in the logs names the password.
    expect(JSON.stringify(log.records)).not.toContain("p@ss");
  }, 30_000);
});
