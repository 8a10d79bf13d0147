import { describe, expect, it } from "vitest";
import { createRedisTokenCache, lockKeyOf } from "../../src/token/redis-token-cache.js";
import type { SharedToken, SharedTokenCache } from "../../src/token/shared-token-cache.js";
import {
  issueSharedToken,
  recordingLogger,
  redisCacheConfig,
  skipWithoutRedis,
  useCacheCleanup,
  useRawRedisClient,
  useRedisServer,
} from "../helpers/redis-server.js";

const LOCK_TTL_MS = 500;

/**
 * Where a test tells two outcomes apart by time, the lock lives long enough that a loaded
 * 2-core machine (four test files at once) cannot blur them: the other outcome comes seconds
 * later, not a few hundred milliseconds.
 */
const LONG_LOCK_TTL_MS = 1_500;
const STUCK_LOCK_TTL_MS = 20_000;

const issue = (accessToken: string) => issueSharedToken(accessToken);

function deferred<T>() {
  let resolve: (value: T) => void = () => {};
  let reject: (err: unknown) => void = () => {};
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe.skipIf(skipWithoutRedis)("redis token cache: the cross-replica lock", () => {
  const redis = useRedisServer();
  const rawClient = useRawRedisClient(redis);
  const caches = useCacheCleanup();

  function setup(lockTtlMs = LOCK_TTL_MS) {
    const config = redisCacheConfig(redis().url, { lockTtlMs });
    const log = recordingLogger();
    const replicas = [0, 1, 2].map(() => createRedisTokenCache({ config, logger: log.logger }));
    caches.push(...replicas);
    const lockKey = lockKeyOf(config.keyPrefix, "cred");
    const get = (
      cache: SharedTokenCache,
      fetchFromIdp: () => Promise<SharedToken>,
      signal?: AbortSignal,
    ) =>
      cache.getOrFetch({
        credentialKey: "cred",
        secret: "s3cret",
        refreshFraction: 0.75,
        fetchFromIdp,
        signal,
      });
    const waitForLock = async () => {
      while ((await rawClient().get(lockKey)) === null) await new Promise((r) => setTimeout(r, 5));
    };
    return { config, log, replicas, lockKey, get, waitForLock };
  }

  it("lets the others proceed after lockTtl when the holder's fetch never returns", async () => {
    const { log, replicas, lockKey, get, waitForLock } = setup(LONG_LOCK_TTL_MS);
    const [a, b, c] = replicas as [SharedTokenCache, SharedTokenCache, SharedTokenCache];
    const hung = deferred<SharedToken>();
    const fromA = get(a, () => hung.promise);
    await waitForLock();
    // What is left of the lock when the wait starts: a loaded machine may see it late. Taken
    // after the start, so however late the answer comes the lock had at least that much left.
    const started = performance.now();
    const lockLeftMs = await rawClient().pTTL(lockKey);

    let otherFetches = 0;
    const slow = deferred<SharedToken>();
    const fromB = get(b, () => {
      otherFetches++;
      return slow.promise;
    });
    const fromC = get(c, () => {
      otherFetches++;
      return slow.promise;
    });
    // B or C takes the expired lock; until then neither fetches.
    while (otherFetches === 0) await new Promise((r) => setTimeout(r, 5));
    const waitedMs = performance.now() - started;
    expect(waitedMs).toBeGreaterThanOrEqual(lockLeftMs - 5);
    // Before their own give-up at 2 × lockTtl, and through the lock: one of them holds it now
    // (a give-up fetches without one, and says so).
    expect(waitedMs).toBeLessThan(2 * LONG_LOCK_TTL_MS);
    const ownerWhileFetching = await rawClient().get(lockKey);
    expect(ownerWhileFetching).not.toBeNull();
    expect(log.records.filter((r) => r.level === "warn")).toEqual([]);

    // The dead holder comes back: it may store its token, but must not release the new lock.
    hung.resolve(issue("token-from-a"));
    expect((await fromA).accessToken).toBe("token-from-a");
    expect(await rawClient().get(lockKey)).toBe(ownerWhileFetching);

    slow.resolve(issue("token-from-b-or-c"));
    const [tb, tc] = await Promise.all([fromB, fromC]);
    expect(otherFetches).toBe(1);
    // The waiter may pick up the late holder's token, stored while it polled: also a fresh one.
    const waiterToken = tb.accessToken === "token-from-b-or-c" ? tc : tb;
    expect([tb.accessToken, tc.accessToken]).toContain("token-from-b-or-c");
    expect(["token-from-a", "token-from-b-or-c"]).toContain(waiterToken.accessToken);
    expect(await rawClient().get(lockKey)).toBeNull();
  });

  it("releases the lock at once when the holder's fetch fails", async () => {
    // A lock that would otherwise hold B back for 20 s.
    const { replicas, get } = setup(STUCK_LOCK_TTL_MS);
    const [a, b] = replicas as [SharedTokenCache, SharedTokenCache];
    const failing = deferred<SharedToken>();
    // Wait for the fetch itself, not only the lock: A re-reads Redis after taking the lock, and a
    // rejection before anyone awaits `failing` would be an unhandled one.
    const aFetching = deferred<void>();
    const fromA = get(a, () => {
      aFetching.resolve();
      return failing.promise;
    });
    await aFetching.promise;
    let bFetches = 0;
    const fromB = get(b, async () => {
      bFetches++;
      return issue("token-from-b");
    });
    const started = performance.now();
    failing.reject(new Error("invalid_client"));
    await expect(fromA).rejects.toThrow("invalid_client");
    expect((await fromB).accessToken).toBe("token-from-b");
    expect(bFetches).toBe(1);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it("bounds waiting at 2 × lockTtl, then fetches locally", async () => {
    const { log, replicas, lockKey, get } = setup();
    // A lock some stuck process keeps renewing.
    await rawClient().set(lockKey, "someone-else", { expiration: { type: "PX", value: 60_000 } });
    const started = performance.now();
    const token = await get(replicas[0] as SharedTokenCache, async () => issue("local"));
    const elapsedMs = performance.now() - started;
    expect(token.accessToken).toBe("local");
    expect(elapsedMs).toBeGreaterThanOrEqual(2 * LOCK_TTL_MS);
    // Generous upper slack: a loaded 2-core machine runs four test files at once.
    expect(elapsedMs).toBeLessThan(2 * LOCK_TTL_MS + 1_500);
    expect(await rawClient().get(lockKey)).toBe("someone-else");
    expect(log.records.filter((r) => r.level === "warn").map((r) => r.msg)).toEqual([
      "waited too long for another replica's token fetch; fetching locally",
    ]);
  });
  it("stops waiting for another replica's fetch when its signal aborts (shutdown)", async () => {
    const { replicas, lockKey, get } = setup(STUCK_LOCK_TTL_MS);
    await rawClient().set(lockKey, "someone-else", { expiration: { type: "PX", value: 60_000 } });
    const controller = new AbortController();
    let fetched = 0;
    const started = performance.now();
    const waiting = get(
      replicas[0] as SharedTokenCache,
      async () => {
        fetched++;
        return issue("local");
      },
      controller.signal,
    );
    setTimeout(() => controller.abort(new Error("shutting down")), 100);
    await expect(waiting).rejects.toThrow("shutting down");
    // Without the signal it would poll for 2 × lockTtl (40 s here), then fetch.
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(fetched).toBe(0);
  });
});
