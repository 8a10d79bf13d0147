/**
 * Issue 18: node-redis' cluster client gives up for good when its first connect finds no root
 * node (RootNodesUnavailableError), and a connect to a node that serves no slots yet (a cluster
 * still being created) "succeeds" into a client whose every command fails. A proxy that starts
 * before its Redis Cluster (a rollout of both, a cluster restarting) must still join it.
 */
import { afterEach, describe, expect, it } from "vitest";
import { createRedisTokenCache } from "../../src/token/redis-token-cache.js";
import type { SharedToken, SharedTokenCache } from "../../src/token/shared-token-cache.js";
import {
  freePort,
  issueSharedToken,
  recordingLogger,
  redisCacheConfig,
  skipWithoutRedis,
} from "../helpers/redis-server.js";
import { type RedisClusterSetup, startRedisCluster } from "../helpers/redis-topologies.js";

describe.skipIf(skipWithoutRedis)(
  "redis token cache: a cluster that starts after the proxy",
  () => {
    const caches: SharedTokenCache[] = [];
    let cluster: RedisClusterSetup | undefined;
    afterEach(async () => {
      await Promise.all(caches.splice(0).map((cache) => cache.close()));
      await cluster?.stop();
      cluster = undefined;
    });

    it("fetches locally while no node answers, then connects and shares tokens", async () => {
      const port = await freePort();
      const config = redisCacheConfig("", {
        url: undefined,
        clusterNodes: [`redis://127.0.0.1:${port}`],
        commandTimeoutMs: 500,
      });
      const log = recordingLogger();
      const make = () => {
        const cache = createRedisTokenCache({ config, logger: log.logger });
        caches.push(cache);
        return cache;
      };
      let fetches = 0;
      const get = (cache: SharedTokenCache) =>
        cache.getOrFetch({
          credentialKey: "cred",
          secret: "s3cret",
          refreshFraction: 0.75,
          fetchFromIdp: async (): Promise<SharedToken> => issueSharedToken(`token-${++fetches}`),
        });

      const early = make();
      expect((await get(early)).accessToken).toBe("token-1"); // nobody there: fetched locally
      expect(early.state()).toBe("down");

      cluster = await startRedisCluster({ firstPort: port });
      const deadline = Date.now() + 20_000;
      while (early.state() !== "up" && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(early.state()).toBe("up");

      // Now shared: the early cache stores a token and a fresh one reads it.
      const stored = await get(early);
      const late = make();
      const lateToken = await get(late);
      expect(lateToken.accessToken).toBe(stored.accessToken);
      expect(fetches).toBe(2);
    }, 40_000);
  },
);
