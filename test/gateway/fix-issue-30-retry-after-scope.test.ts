import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { type RedisServer, skipWithoutRedis, startRedisServer } from "../helpers/redis-server.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { sleep, waitFor } from "../helpers/wait.js";
import {
  type Answer,
  metricsText,
  send,
  upstreamEntry,
  upstreamStatus,
} from "../pacing/support/gateway.js";

/**
 * Issue 30 item 4, "one answer pauses the neighbours": an upstream's `Retry-After: 31536000` on
 * one route paused every upstream entry sharing its credential at its origin — other routes,
 * other `allow` lists, `by: caller` — for a fixed 600 s.
 *
 * Now the pause holds the entry that got the answer (`rateLimit.pauseScope: upstream`, the
 * default) or, when it says `pauseScope: credential`, every entry spending its credential at
 * that origin, and never longer than the receiving entry's `rateLimit.maxPause`. A request to a
 * paused entry waits within its `wait`; when the pause outlasts that it is answered 429
 * `upstream_rate_limited` at once, with a Retry-After no longer than `maxPause`. The shared
 * (Redis) pacer follows the same rule.
 *
 * The upstream answers 429 with a one-year Retry-After to any path containing `/provoke`, 200
 * to the rest, and records what reached it.
 */

const ONE_YEAR_SECONDS = "31536000";

interface Arrival {
  path: string;
  atMs: number;
}

async function startProvokableUpstream(
  pki: TestPki,
): Promise<{ upstream: FakeUpstream; arrivals: Arrival[] }> {
  const arrivals: Arrival[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    arrivals.push({ path: req.url ?? "", atMs: performance.now() });
    req.resume();
    if ((req.url ?? "").includes("/provoke")) {
      res.writeHead(429, { "content-type": "text/plain", "retry-after": ONE_YEAR_SECONDS });
      res.end("come back next year");
      return;
    }
    res.writeHead(200, { "content-type": "text/plain", "content-length": 2 });
    res.end("ok");
  };
  return { upstream: await startFakeUpstream({ cert: pki.good, handler }), arrivals };
}

/** The proxy's refusal of a paused entry: at once, with a Retry-After within `maxPauseSeconds`. */
function expectPausedRefusal(answer: Answer, maxPauseSeconds: number): void {
  expect(answer.status, answer.text).toBe(429);
  expect(answer.code).toBe("upstream_rate_limited");
  const retryAfter = Number(answer.headers["retry-after"]);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(maxPauseSeconds);
  // Refused at once, not after waiting (the waits here are ≤ 1 s; the pauses 2–3 s).
  expect(answer.ms).toBeLessThan(1_500);
}

/**
 * The entries of both suites: `reports` and `billing` spend one credential (the default scope:
 * an answer pauses its entry alone); `orders`, `carts` and `carts-impatient` spend another and
 * share its pauses (`pauseScope: credential` on the entry that gets the answer).
 */
function entries(origin: string, emulator: Emulator, extra: Record<string, unknown> = {}) {
  const shop = { tokenParams: { audience: "shop" } };
  return [
    upstreamEntry("reports", origin, emulator, {
      rateLimit: { ...extra, maxPause: "3s", wait: "1s" },
    }),
    // Another route, another allow list's worth of traffic, by caller: same credential.
    upstreamEntry("billing", origin, emulator, {
      rateLimit: { ...extra, by: "caller", wait: "1s" },
    }),
    upstreamEntry("orders", origin, emulator, {
      ...shop,
      rateLimit: { ...extra, pauseScope: "credential", maxPause: "2s", wait: "500ms" },
    }),
    upstreamEntry("carts", origin, emulator, { ...shop, rateLimit: { ...extra, wait: "10s" } }),
    upstreamEntry("carts-impatient", origin, emulator, {
      ...shop,
      rateLimit: { ...extra, wait: "500ms" },
    }),
  ];
}

/** The behaviour both pacers (local and shared) must show; `gateway()` is started by the suite. */
function describeScopes(gateway: () => AppUnderTest, arrivals: () => Arrival[]) {
  it("pauseScope upstream: a one-year Retry-After pauses its route alone, for at most maxPause", async () => {
    const { url, adminUrl } = gateway();
    const provoked = await send(`${url}/reports/provoke`);
    // The upstream's own answer is relayed as it came.
    expect(provoked.status).toBe(429);
    expect(provoked.headers["retry-after"]).toBe(ONE_YEAR_SECONDS);
    const pausedAtMs = performance.now();

    // The neighbour spending the same credential at the same origin goes on at once.
    const before = arrivals().length;
    const neighbour = await send(`${url}/billing/still-working`);
    expect(neighbour.status).toBe(200);
    expect(neighbour.ms).toBeLessThan(1_500);
    expect(
      arrivals()
        .slice(before)
        .map((a) => a.path),
    ).toEqual(["/still-working"]);

    // The paused route: its wait (1 s) is shorter than the pause (3 s, not a year).
    const refused = await send(`${url}/reports/refused`);
    expectPausedRefusal(refused, 3);
    expect(arrivals().map((a) => a.path)).not.toContain("/refused");
    const status = await upstreamStatus(adminUrl, "reports");
    expect(status.rateLimit).toMatchObject({ pause: { reason: "429" } });
    const pause = status.rateLimit?.pause as { remainingSeconds: number };
    expect(pause.remainingSeconds).toBeLessThanOrEqual(3);
    expect((await upstreamStatus(adminUrl, "billing")).rateLimit).toMatchObject({ pause: null });

    // Once maxPause has passed, the route works again.
    await sleep(Math.max(0, 3_100 - (performance.now() - pausedAtMs)));
    await waitFor(
      async () => (await send(`${url}/reports/again`)).status === 200,
      "the route after maxPause",
      5_000,
    );
  }, 30_000);

  it("pauseScope credential: the entries sharing the credential are paused too, for at most maxPause", async () => {
    const { url } = gateway();
    const provoked = await send(`${url}/orders/provoke`);
    expect(provoked.status).toBe(429);
    const pausedAtMs = performance.now();

    // A neighbour that may wait only 500 ms is refused at once, within the receiver's maxPause.
    const impatient = await send(`${url}/carts-impatient/refused`);
    expectPausedRefusal(impatient, 2);
    // A neighbour that may wait 10 s waits the pause out (2 s, not a year) and goes.
    const patient = await send(`${url}/carts/waited`);
    expect(patient.status, patient.text).toBe(200);
    const arrived = arrivals().find((a) => a.path === "/waited");
    expect(arrived).toBeDefined();
    expect(arrived!.atMs - pausedAtMs).toBeGreaterThan(1_500);
    expect(arrived!.atMs - pausedAtMs).toBeLessThan(8_000);
    // The other credential's entries were never paused by it.
    const other = await send(`${url}/reports/other-credential`);
    expect(other.status).toBe(200);
    expect(arrivals().map((a) => a.path)).not.toContain("/refused");
  }, 30_000);

  it("counts the pauses and refusals by upstream", async () => {
    const metrics = await metricsText(gateway().adminUrl);
    const line = (upstream: string, reason: string) =>
      `bearer_proxy_rate_limited_total{upstream="${upstream}",reason="${reason}"} 1`;
    expect(metrics).toContain(line("reports", "upstream_429"));
    expect(metrics).toContain(line("reports", "paused"));
    expect(metrics).toContain(line("orders", "upstream_429"));
    expect(metrics).toContain(line("carts-impatient", "paused"));
  });
}

describe("Retry-After pauses by pauseScope, capped at maxPause (local pacers)", () => {
  let emulator: Emulator;
  let upstream: FakeUpstream;
  let arrivals: Arrival[];
  let gateway: AppUnderTest;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    ({ upstream, arrivals } = await startProvokableUpstream(pki));
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        upstreams: entries(upstream.origin, emulator, { requests: 100 }).map((entry) =>
          // carts-impatient and carts keep no limit of their own: pauses only.
          String(entry.name).startsWith("carts")
            ? { ...entry, rateLimit: { wait: (entry.rateLimit as { wait: string }).wait } }
            : entry,
        ),
      },
    });
    for (const name of ["reports", "billing", "orders", "carts", "carts-impatient"]) {
      expect((await send(`${gateway.url}/${name}/warm`)).status).toBe(200);
    }
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([upstream?.close(), emulator?.close()]);
  });

  describeScopes(
    () => gateway,
    () => arrivals,
  );
});

describe.skipIf(skipWithoutRedis)(
  "Retry-After pauses by pauseScope, capped at maxPause (shared pacers)",
  () => {
    let emulator: Emulator;
    let redis: RedisServer;
    let upstream: FakeUpstream;
    let arrivals: Arrival[];
    let gateway: AppUnderTest;

    beforeAll(async () => {
      const pki = await createTestPki();
      emulator = await startTlsEmulator(pki);
      redis = await startRedisServer();
      ({ upstream, arrivals } = await startProvokableUpstream(pki));
      gateway = await startAppUnderTest({
        caPem: pki.caPem,
        config: {
          tokenCache: { redis: { url: redis.url, keyPrefix: "bp-issue-30:" } },
          upstreams: entries(upstream.origin, emulator, { requests: 100, scope: "shared" }),
        },
      });
      await waitFor(
        async () => /^bearer_proxy_redis_up 1$/m.test(await metricsText(gateway.adminUrl)),
        "the Redis connection",
        10_000,
      );
      for (const name of ["reports", "billing", "orders", "carts", "carts-impatient"]) {
        expect((await send(`${gateway.url}/${name}/warm`)).status).toBe(200);
        // Paced through Redis, not alone.
        const status = await upstreamStatus(gateway.adminUrl, name);
        expect(status.rateLimit).toMatchObject({ limit: { scope: "shared" }, degraded: false });
      }
    }, 60_000);

    afterAll(async () => {
      await gateway?.close();
      await Promise.all([upstream?.close(), emulator?.close()]);
      await redis?.stop();
    });

    describeScopes(
      () => gateway,
      () => arrivals,
    );
  },
);
