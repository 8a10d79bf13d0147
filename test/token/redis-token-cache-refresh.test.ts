import { afterEach, describe, expect, it } from "vitest";
import { fingerprint } from "../../src/base/fingerprint.js";
import { createRedisTokenCache } from "../../src/token/redis-token-cache.js";
import type { SharedToken, SharedTokenCache } from "../../src/token/shared-token-cache.js";
import {
  recordingLogger,
  redisCacheConfig,
  skipWithoutRedis,
  useRedisServer,
} from "../helpers/redis-server.js";

const LIFETIME_MS = 60_000;

describe.skipIf(skipWithoutRedis)("redis token cache: refresh point and rejected tokens", () => {
  const redis = useRedisServer();
  const caches: SharedTokenCache[] = [];
  afterEach(async () => {
    await Promise.all(caches.splice(0).map((cache) => cache.close()));
  });

  /** Two replicas on one fake wall clock (real time only drives Redis TTLs, which are long). */
  function setup() {
    const config = redisCacheConfig(redis().url);
    const clock = { nowMs: Date.now() };
    const now = () => clock.nowMs;
    const a = createRedisTokenCache({ config, logger: recordingLogger().logger, now });
    const b = createRedisTokenCache({ config, logger: recordingLogger().logger, now });
    caches.push(a, b);
    const fetched: string[] = [];
    const get = (cache: SharedTokenCache, rejectFingerprint?: string) =>
      cache.getOrFetch({
        credentialKey: "cred",
        secret: "s3cret",
        refreshFraction: 0.75,
        rejectFingerprint,
        fetchFromIdp: async (): Promise<SharedToken> => {
          const accessToken = `token-${fetched.length + 1}`;
          fetched.push(accessToken);
          return {
            accessToken,
            tokenType: "Bearer",
            scope: undefined,
            obtainedAtWallMs: clock.nowMs,
            expiresAtWallMs: clock.nowMs + LIFETIME_MS,
          };
        },
      });
    return { clock, a, b, fetched, get };
  }

  it("shares a token until obtained + 0.75 × lifetime, then one replica fetches a new one", async () => {
    const { clock, a, b, fetched, get } = setup();
    const start = clock.nowMs;
    expect((await get(a)).accessToken).toBe("token-1");

    clock.nowMs = start + 0.75 * LIFETIME_MS - 1;
    expect((await get(b)).accessToken).toBe("token-1");
    expect(fetched).toEqual(["token-1"]);

    // Past the refresh point the old token is still valid but no longer handed out.
    clock.nowMs = start + 0.75 * LIFETIME_MS;
    expect((await get(b)).accessToken).toBe("token-2");
    expect((await get(a)).accessToken).toBe("token-2");
    expect(fetched).toEqual(["token-1", "token-2"]);
  });

  it("treats a stored token whose fingerprint was rejected upstream as stale", async () => {
    const { a, b, fetched, get } = setup();
    const first = await get(a);
    const rejected = fingerprint(first.accessToken);

    // Replica A got a 401 with token-1: it fetches anew although token-1 is young.
    expect((await get(a, rejected)).accessToken).toBe("token-2");
    // Replica B, rejected with the same token, finds token-2 in Redis and doesn't fetch.
    expect((await get(b, rejected)).accessToken).toBe("token-2");
    // A rejection of some other token doesn't make token-2 stale.
    expect((await get(b, fingerprint("unrelated"))).accessToken).toBe("token-2");
    expect(fetched).toEqual(["token-1", "token-2"]);
  });

  it("does not store a token that is already expired", async () => {
    const { clock, a, b, fetched } = setup();
    const expired = () =>
      Promise.resolve<SharedToken>({
        accessToken: `expired-${fetched.push("x")}`,
        tokenType: "Bearer",
        scope: undefined,
        obtainedAtWallMs: clock.nowMs - 10_000,
        expiresAtWallMs: clock.nowMs - 1,
      });
    const args = {
      credentialKey: "cred-expired",
      secret: "s3cret",
      refreshFraction: 0.75,
      fetchFromIdp: expired,
    };
    expect((await a.getOrFetch(args)).accessToken).toBe("expired-1");
    expect((await b.getOrFetch(args)).accessToken).toBe("expired-2");
  });
});
