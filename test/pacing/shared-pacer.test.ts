/**
 * Issue 26, `scope: shared`: two pacers (two replicas) on one real Redis hold the combined
 * limit against an upstream that counts any rolling second; `wait` and pauses work as in the
 * local pacer; a Redis that is gone makes each replica pace alone instead of failing.
 * Margins and timeouts allow for a machine the whole suite shares (burst-against-rolling-limit).
 */
import { createClient } from "redis";
import { Agent, request } from "undici";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { REFUND } from "../../src/pacing/gcra-script.js";
import type { Admission, Pacer } from "../../src/pacing/limiter.js";
import { createSharedPacer, type PacingRedis } from "../../src/pacing/shared-pacer.js";
import { type LimitedUpstream, startLimitedUpstream } from "../helpers/limited-upstream.js";
import { skipWithoutRedis, useRedisServer } from "../helpers/redis-server.js";
import { createTestPki } from "../helpers/tls.js";

const LIMIT = 50;
const MARGIN_MS = 300;

describe.skipIf(skipWithoutRedis)("shared pacer on one Redis", () => {
  const redisServer = useRedisServer();
  const clients: PacingRedis[] = [];
  const closers: (() => void)[] = [];
  let upstream: LimitedUpstream;
  let agent: Agent;
  let prefix = "";

  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startLimitedUpstream({ cert: pki.good, limit: LIMIT });
    agent = new Agent({ connections: 16, connect: { ca: pki.caPem } });
    for (let i = 0; i < 2; i++) {
      const client = createClient({ url: redisServer().url, disableOfflineQueue: true });
      client.on("error", () => {});
      await client.connect();
      clients.push(client as unknown as PacingRedis);
      closers.push(() => client.destroy());
    }
  });
  afterAll(async () => {
    for (const close of closers) close();
    await agent?.close();
    await upstream?.close();
  });
  beforeEach(async () => {
    prefix = `bp-test-${Math.random().toString(36).slice(2)}:pace:reports:`;
    // Warm connections (see burst-against-rolling-limit.test.ts), then forget them upstream.
    await Promise.all(Array.from({ length: 16 }, () => send()));
    upstream.reset();
  });

  async function send(): Promise<number> {
    const res = await request(`${upstream.origin}/`, { dispatcher: agent });
    await res.body.dump();
    return res.statusCode;
  }

  function replica(index: number, options: { waitMs?: number; burst?: number } = {}): Pacer {
    const client = clients[index]!;
    return createSharedPacer({
      rate: { requests: LIMIT, perMs: 1_000, burst: options.burst ?? 5, marginMs: MARGIN_MS },
      waitMs: options.waitMs ?? 10_000,
      redis: () => client,
      keyPrefix: prefix,
      commandTimeoutMs: 5_000,
    });
  }

  it("two replicas together never exceed the limit: 100/100 succeed, no 429", async () => {
    const replicas = [replica(0), replica(1)];
    const startedMs = performance.now();
    const statuses = await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        const admission = await replicas[i % 2]!.acquire("reports");
        expect(admission.ok).toBe(true);
        return send();
      }),
    );
    const tookMs = performance.now() - startedMs;
    for (const pacer of replicas) {
      expect(pacer.state().degraded).toBe(false);
      pacer.close();
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(100);
    expect(upstream.rejected()).toBe(0);
    expect(upstream.maxInAnyWindow()).toBeLessThanOrEqual(LIMIT);
    // One budget for both: the pace of one 50-per-1.3-s budget (~2.44 s), not two (~1.14 s:
    // each replica's 50 would go as one budget's first 50 do).
    expect(tookMs).toBeGreaterThan(2_400);
    expect(tookMs).toBeLessThan(5_000);
  });

  it("refuses with rate_limited and Retry-After when the shared turn is beyond `wait`", async () => {
    const pacer = replica(0, { waitMs: 100, burst: 0 });
    const answers: Admission[] = await Promise.all(
      Array.from({ length: 10 }, () => pacer.acquire("reports")),
    );
    // 26 ms apart: the first 4 fit in 100 ms (0, 26, 52, 78), the rest are refused unbooked.
    expect(answers.filter((x) => x.ok)).toHaveLength(4);
    expect(answers.filter((x) => !x.ok)).toEqual(
      new Array(6).fill({ ok: false, code: "rate_limited", retryAfterSeconds: 1 }),
    );
    pacer.close();
  });

  it("holds requests during a pause on this replica, then books their turns", async () => {
    const pacer = replica(0, { waitMs: 2_000 });
    const pausedAt = performance.now();
    pacer.pause(pausedAt + 300, "503");
    // Each request arrived at most `returnedAt - pausedAt` into the pause (a loaded machine can
    // deschedule the test between two lines), so held to its end it waited at least the rest.
    const answers = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const pending = pacer.acquire("reports");
        const returnedAt = performance.now();
        return { answer: await pending, arrivedBy: returnedAt - pausedAt };
      }),
    );
    for (const { answer, arrivedBy } of answers) {
      expect(answer.ok).toBe(true);
      if (answer.ok) expect(answer.waitedMs + arrivedBy).toBeGreaterThanOrEqual(299);
    }
    expect(performance.now() - pausedAt).toBeGreaterThanOrEqual(299);
    // Shared turns always cost a round trip: even an immediate one is a promise.
    const next = pacer.acquire("reports", undefined, 0);
    expect(next).toBeInstanceOf(Promise);
    await expect(next).resolves.toMatchObject({ ok: true, waitedMs: expect.any(Number) });
    pacer.close();
  });

  it("asks for a place before holding a request; refused one, it gives its booked turn back", async () => {
    // One every 2 s: one turn every ~2.04 s (the 2% margin).
    const pacer = createSharedPacer({
      rate: { requests: 1, perMs: 2_000, burst: 0 },
      waitMs: 5_000,
      redis: () => clients[0]!,
      keyPrefix: prefix,
      commandTimeoutMs: 5_000,
    });
    // A refund sent before Redis knows the script waits for NOSCRIPT, then races later bookings.
    await (clients[0] as unknown as { scriptLoad(text: string): Promise<string> }).scriptLoad(
      REFUND.text,
    );
    // The first turn is booked between these two readings, the next one ~2.04 s after it.
    const firstAskedMs = performance.now();
    expect(await pacer.acquire("reports")).toMatchObject({ ok: true });
    const firstBookedMs = performance.now();
    // Issue 30 item 3: the next turn is ~2 s away, so the request must wait — and has no place.
    let asked = 0;
    const refusedAskedMs = performance.now();
    const refused = await pacer.acquire("reports", undefined, undefined, () => {
      asked++;
      return false;
    });
    const refusedAtMs = performance.now();
    expect(asked).toBe(1);
    expect(refused).toEqual({
      ok: false,
      code: "rate_limited",
      retryAfterSeconds: expect.any(Number),
    });
    // Retry-After: the seconds to that turn, rounded up (5 ms for Redis's clock against ours).
    const { retryAfterSeconds } = refused as { retryAfterSeconds: number };
    expect(retryAfterSeconds).toBeGreaterThanOrEqual(
      Math.ceil((firstAskedMs + 2_040 - refusedAtMs - 5) / 1_000),
    );
    expect(retryAfterSeconds).toBeLessThanOrEqual(
      Math.ceil((firstBookedMs + 2_040 - refusedAskedMs + 5) / 1_000),
    );
    expect(pacer.state().queued).toBe(0);
    // The turn it booked went back: the next request gets it (~2.04 s after the first), not the
    // one after (~4.08 s), however late it asks.
    const parked = await pacer.acquire("reports", undefined, undefined, () => true);
    const parkedGoneMs = performance.now();
    expect(parked).toMatchObject({ ok: true });
    expect(parkedGoneMs - firstAskedMs).toBeGreaterThan(2_000);
    expect(parkedGoneMs - firstAskedMs).toBeLessThan(3_000);
    // During a pause, the place is asked for before anything is booked.
    pacer.pause(performance.now() + 1_000, "429");
    expect(pacer.acquire("reports", undefined, undefined, () => false)).toEqual({
      ok: false,
      code: "rate_limited",
      retryAfterSeconds: 1,
    });
    pacer.close();
  });

  it("paces alone when Redis does not answer, and says so", async () => {
    let failures = 0;
    const pacer = createSharedPacer({
      rate: { requests: 10, perMs: 1_000, burst: 0 },
      waitMs: 0,
      redis: () => ({ eval: () => Promise.reject(new Error("READONLY")) }),
      keyPrefix: prefix,
      onRedisError: () => failures++,
    });
    await expect(pacer.acquire("reports")).resolves.toMatchObject({ ok: true });
    expect(pacer.state()).toMatchObject({ scope: "shared", degraded: true });
    // Now the local pacer answers, synchronously: the second request is over 10/s.
    expect(pacer.acquire("reports")).toMatchObject({ ok: false, code: "rate_limited" });
    expect(failures).toBe(1);
    pacer.close();
  });
});
