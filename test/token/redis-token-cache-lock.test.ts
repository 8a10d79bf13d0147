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

  function setup() {
    const config = redisCacheConfig(redis().url, { lockTtlMs: LOCK_TTL_MS });
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
    const { replicas, lockKey, get, waitForLock } = setup();
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
    expect(waitedMs).toBeLessThan(LOCK_TTL_MS + 400);
    const ownerWhileFetching = await rawClient().get(lockKey);
    expect(ownerWhileFetching).not.toBeNull();

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
    const { replicas, get } = setup();
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
    expect(performance.now() - started).toBeLessThan(LOCK_TTL_MS / 2);
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
    const { replicas, lockKey, get } = setup();
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
    // Without the signal it would poll for 2 × lockTtl (1 s here), then fetch.
    expect(performance.now() - started).toBeLessThan(LOCK_TTL_MS);
    expect(fetched).toBe(0);
  });
});
