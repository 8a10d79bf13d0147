import { describe, expect, it } from "vitest";
import { createRedisTokenCache } from "../../src/token/redis-token-cache.js";
import type { SharedToken } from "../../src/token/shared-token-cache.js";
import {
  issueSharedToken,
  recordingLogger,
  redisCacheConfig,
  skipWithoutRedis,
  useCacheCleanup,
  useRedisServer,
} from "../helpers/redis-server.js";

const REQUESTS_PER_REPLICA = 500;

describe.skipIf(skipWithoutRedis)("redis token cache: single flight across replicas", () => {
  const redis = useRedisServer();
  const caches = useCacheCleanup();

  it.each([3, 10])(
    `makes one token request for %i replicas × ${REQUESTS_PER_REPLICA} concurrent cold requests`,
    async (replicas) => {
      const config = redisCacheConfig(redis().url);
      let fetches = 0;
      const fetchesByReplica = Array.from({ length: replicas }, () => 0);
      const fetcher = (replica: number) => async (): Promise<SharedToken> => {
        fetches++;
        fetchesByReplica[replica] = (fetchesByReplica[replica] ?? 0) + 1;
        // A token endpoint that takes a while, so the other replicas really have to wait.
        await new Promise((resolve) => setTimeout(resolve, 150));
        return issueSharedToken(`token-${fetches}`, { lifetimeMs: 3_600_000 });
      };
      // Separate caches = separate clients and connections, as in separate processes. The burst
      // starts before they have connected, as it would right after a rollout.
      const log = recordingLogger();
      for (let i = 0; i < replicas; i++)
        caches.push(createRedisTokenCache({ config, logger: log.logger }));

      const started = performance.now();
      const results = await Promise.all(
        caches.flatMap((cache, replica) =>
          Array.from({ length: REQUESTS_PER_REPLICA }, () =>
            cache.getOrFetch({
              credentialKey: "cold-credential",
              secret: "s3cret",
              refreshFraction: 0.75,
              fetchFromIdp: fetcher(replica),
            }),
          ),
        ),
      );
      const elapsedMs = performance.now() - started;

      const warnings = log.records.filter((r) => r.level === "warn");
      expect(fetches, `fell back to local fetches: ${JSON.stringify(warnings)}`).toBe(1);
      expect(fetchesByReplica.filter((n) => n === 1)).toHaveLength(1);
      expect(results).toHaveLength(replicas * REQUESTS_PER_REPLICA);
      expect(new Set(results.map((t) => t.accessToken))).toEqual(new Set(["token-1"]));
      expect(caches.every((c) => c.state() === "up")).toBe(true);
      // One fetch (150 ms) plus a few polls, well under the 2 × lockTtl (4 s) wait bound.
      expect(elapsedMs).toBeLessThan(2_500);

      // Warm: later requests on any replica read Redis and never fetch.
      const warm = await Promise.all(
        caches.map((cache, replica) =>
          cache.getOrFetch({
            credentialKey: "cold-credential",
            secret: "s3cret",
            refreshFraction: 0.75,
            fetchFromIdp: fetcher(replica),
          }),
        ),
      );
      expect(fetches).toBe(1);
      expect(new Set(warm.map((t) => t.accessToken))).toEqual(new Set(["token-1"]));
    },
  );

  it("keeps different credentials apart", async () => {
    const config = redisCacheConfig(redis().url);
    const cache = createRedisTokenCache({ config, logger: recordingLogger().logger });
    caches.push(cache);
    const issued: string[] = [];
    const get = (credentialKey: string) =>
      cache.getOrFetch({
        credentialKey,
        secret: "s3cret",
        refreshFraction: 0.75,
        fetchFromIdp: async () => {
          issued.push(credentialKey);
          const nowMs = Date.now();
          return {
            accessToken: `token-for-${credentialKey}`,
            tokenType: "Bearer",
            scope: undefined,
            obtainedAtWallMs: nowMs,
            expiresAtWallMs: nowMs + 60_000,
          };
        },
      });
    const [a, b] = await Promise.all([get("cred-a"), get("cred-b")]);
    expect(a.accessToken).toBe("token-for-cred-a");
    expect(b.accessToken).toBe("token-for-cred-b");
    expect((await get("cred-a")).accessToken).toBe("token-for-cred-a");
    expect(issued.sort()).toEqual(["cred-a", "cred-b"]);
  });
});
