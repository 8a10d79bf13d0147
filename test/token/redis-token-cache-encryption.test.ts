import { createClient } from "redis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createRedisTokenCache } from "../../src/token/redis-token-cache.js";
import type { SharedToken, SharedTokenCache } from "../../src/token/redis-types.js";
import {
  recordingLogger,
  redisCacheConfig,
  skipWithoutRedis,
  useRedisServer,
} from "../helpers/redis-server.js";

const SECRET = "client-secret-9f8e7d";
const ACCESS_TOKEN = "at-4b1d-very-secret-bearer";

function issue(accessToken: string): SharedToken {
  const nowMs = Date.now();
  return {
    accessToken,
    tokenType: "Bearer",
    scope: "read",
    obtainedAtWallMs: nowMs,
    expiresAtWallMs: nowMs + 60_000,
  };
}

describe.skipIf(skipWithoutRedis)("redis token cache: what Redis can see", () => {
  const redis = useRedisServer();
  let raw: ReturnType<typeof createClient>;
  const caches: SharedTokenCache[] = [];
  beforeAll(async () => {
    raw = createClient({ url: redis().url });
    raw.on("error", () => {});
    await raw.connect();
  });
  afterAll(async () => {
    await raw.close();
  });
  afterEach(async () => {
    await Promise.all(caches.splice(0).map((cache) => cache.close()));
  });

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

    const keys = await raw.keys(`${config.keyPrefix}*`);
    // The lock was released after storing.
    expect(keys).toEqual([`${config.keyPrefix}token:cred-1`]);
    const stored = await raw.get(`${config.keyPrefix}token:cred-1`);
    expect(stored).toMatch(/^[A-Za-z0-9+/]+=*$/);
    const decoded = Buffer.from(stored ?? "", "base64").toString("latin1");
    for (const text of [stored ?? "", decoded, keys.join(" ")]) {
      expect(text).not.toContain(ACCESS_TOKEN);
      expect(text).not.toContain(SECRET);
    }
    const ttlMs = await raw.pTTL(`${config.keyPrefix}token:cred-1`);
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
    const key = `${config.keyPrefix}token:cred-3`;
    const bytes = Buffer.from((await raw.get(key)) ?? "", "base64");
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 0xff;
    await raw.set(key, bytes.toString("base64"), { expiration: { type: "PX", value: 60_000 } });
    expect((await get()).accessToken).toBe("token-2");
    expect(fetches).toBe(2);
  });
});
