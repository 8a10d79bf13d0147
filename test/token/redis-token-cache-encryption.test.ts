import { describe, expect, it } from "vitest";
import { createRedisTokenCache, tokenKeyOf } from "../../src/token/redis-token-cache.js";
import type { SharedTokenCache } from "../../src/token/shared-token-cache.js";
import {
  issueSharedToken,
  recordingLogger,
  redisCacheConfig,
  skipWithoutRedis,
  useCacheCleanup,
  useRawRedisClient,
  useRedisServer,
} from "../helpers/redis-server.js";

const SECRET = "client-secret-9f8e7d";
const ACCESS_TOKEN = "at-4b1d-very-secret-bearer";

const issue = (accessToken: string) => issueSharedToken(accessToken, { scope: "read" });

describe.skipIf(skipWithoutRedis)("redis token cache: what Redis can see", () => {
  const redis = useRedisServer();
  const rawClient = useRawRedisClient(redis);
  const caches = useCacheCleanup();

  function replica(config: ReturnType<typeof redisCacheConfig>): SharedTokenCache {
    const cache = createRedisTokenCache({ config, logger: recordingLogger().logger });
    caches.push(cache);
    return cache;
  }

  it("stores only ciphertext under secret-free keys, with a TTL of the token's lifetime", async () => {
    const config = redisCacheConfig(redis().url);
    const token = await replica(config).getOrFetch({
      credentialKey: "cred-1",
      secret: SECRET,
      refreshFraction: 0.75,
      fetchFromIdp: async () => issue(ACCESS_TOKEN),
    });
    expect(token.accessToken).toBe(ACCESS_TOKEN);

    const keys = await rawClient().keys(`${config.keyPrefix}*`);
    // The lock was released after storing.
    expect(keys).toEqual([tokenKeyOf(config.keyPrefix, "cred-1")]);
    const stored = await rawClient().get(tokenKeyOf(config.keyPrefix, "cred-1"));
    expect(stored).toMatch(/^[A-Za-z0-9+/]+=*$/);
    const decoded = Buffer.from(stored ?? "", "base64").toString("latin1");
    for (const text of [stored ?? "", decoded, keys.join(" ")]) {
      expect(text).not.toContain(ACCESS_TOKEN);
      expect(text).not.toContain(SECRET);
    }
    const ttlMs = await rawClient().pTTL(tokenKeyOf(config.keyPrefix, "cred-1"));
    expect(ttlMs).toBeGreaterThan(55_000);
    expect(ttlMs).toBeLessThanOrEqual(60_000);
  });

  it("does not hand a token to a replica holding another secret", async () => {
    const config = redisCacheConfig(redis().url);
    await replica(config).getOrFetch({
      credentialKey: "cred-2",
      secret: SECRET,
      refreshFraction: 0.75,
      fetchFromIdp: async () => issue(ACCESS_TOKEN),
    });
    let otherFetches = 0;
    const other = await replica(config).getOrFetch({
      credentialKey: "cred-2",
      secret: "rotated-secret",
      refreshFraction: 0.75,
      fetchFromIdp: async () => {
        otherFetches++;
        return issue("token-under-rotated-secret");
      },
    });
    expect(otherFetches).toBe(1);
    expect(other.accessToken).toBe("token-under-rotated-secret");
  });

  it("treats a tampered value as a miss and fetches", async () => {
    const config = redisCacheConfig(redis().url);
    const cache = replica(config);
    let fetches = 0;
    const get = () =>
      cache.getOrFetch({
        credentialKey: "cred-3",
        secret: SECRET,
        refreshFraction: 0.75,
        fetchFromIdp: async () => issue(`token-${++fetches}`),
      });
    await get();
    const key = tokenKeyOf(config.keyPrefix, "cred-3");
    const bytes = Buffer.from((await rawClient().get(key)) ?? "", "base64");
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 0xff;
    await rawClient().set(key, bytes.toString("base64"), {
      expiration: { type: "PX", value: 60_000 },
    });
    expect((await get()).accessToken).toBe("token-2");
    expect(fetches).toBe(2);
  });
});
