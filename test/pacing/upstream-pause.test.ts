/**
 * Issue 26: an upstream's 429/503 with Retry-After (delta-seconds or HTTP-date) pauses its
 * pacer: waiting requests and new arrivals wait within `wait`, the rest get 429
 * `upstream_rate_limited` with the remaining time, and nothing reaches the upstream meanwhile.
 * Holds with or without a rate limit of our own.
 */
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Admission } from "../../src/proxy/pacing/limiter.js";
import { createLocalPacer } from "../../src/proxy/pacing/local-pacer.js";
import { createPauseTable, parseRetryAfter } from "../../src/proxy/pacing/pause.js";
import { type LimitedUpstream, startLimitedUpstream } from "../helpers/limited-upstream.js";
import { createTestPki } from "../helpers/tls.js";
import { FakeClock } from "../token/fake-clock.js";

const NOW_WALL_MS = Date.UTC(2026, 10, 22, 12, 0, 0);

describe("parseRetryAfter", () => {
  it("reads delta-seconds", () => {
    expect(parseRetryAfter("120", NOW_WALL_MS)).toBe(120_000);
    expect(parseRetryAfter(" 0 ", NOW_WALL_MS)).toBe(0);
    expect(parseRetryAfter(["3", "9"], NOW_WALL_MS)).toBe(3_000);
  });

  it("reads the three HTTP-date forms of RFC 9110 §5.6.7, as GMT", () => {
    expect(parseRetryAfter("Sun, 22 Nov 2026 12:00:30 GMT", NOW_WALL_MS)).toBe(30_000);
    expect(parseRetryAfter("Sunday, 22-Nov-26 12:01:00 GMT", NOW_WALL_MS)).toBe(60_000);
    expect(parseRetryAfter("Sun Nov 22 12:00:05 2026", NOW_WALL_MS)).toBe(5_000);
  });

  it("treats a date in the past as 0, caps long pauses, ignores what it can't read", () => {
    expect(parseRetryAfter("Sun, 22 Nov 2026 11:00:00 GMT", NOW_WALL_MS)).toBe(0);
    expect(parseRetryAfter("86400", NOW_WALL_MS)).toBe(10 * 60_000);
    for (const bad of ["", "-1", "1.5", "soon", "Sun, 31 Feb 2026 12:00:00 GMT", undefined]) {
      expect(parseRetryAfter(bad, NOW_WALL_MS)).toBeUndefined();
    }
  });
});

describe("a pacer paused by its upstream", () => {
  it("holds waiting and new requests until the pause ends, refuses those it would outlast", async () => {
    const clock = new FakeClock();
    const pacer = createLocalPacer({
      rate: { requests: 10, perMs: 1_000, burst: 0, marginMs: 0 },
      waitMs: 1_000,
      clock,
    });
    pacer.acquire("k");
    const early = pacer.acquire("k") as Promise<Admission>;
    await clock.advance(50);
    pacer.pause(clock.now() + 500, "429");
    expect(pacer.state()).toMatchObject({ pausedForMs: 500, pauseReason: "429", queued: 1 });
    const during = pacer.acquire("k") as Promise<Admission>;
    // The pause has 500 ms to go: a request that may wait only 300 ms is refused at once.
    expect(pacer.acquire("other", undefined, 300)).toEqual({
      ok: false,
      code: "upstream_rate_limited",
      retryAfterSeconds: 1,
    });
    let released = 0;
    void early.then(() => released++);
    void during.then(() => released++);
    await clock.advance(499);
    expect(released).toBe(0);
    await clock.advance(1);
    await expect(early).resolves.toMatchObject({ ok: true, waitedMs: 550 });
    await clock.advance(100);
    await expect(during).resolves.toMatchObject({ ok: true, waitedMs: 600 });
  });

  it("answers upstream_rate_limited with the remaining pause when it is longer than `wait`", async () => {
    const clock = new FakeClock();
    const pacer = createLocalPacer({ waitMs: 2_000, clock });
    const waiting: Promise<Admission>[] = [];
    pacer.pause(clock.now() + 1_500, "503");
    waiting.push(pacer.acquire("k") as Promise<Admission>);
    await clock.advance(200);
    // A new pause, longer than what the first waiter has left: it is told at once.
    pacer.pause(clock.now() + 5_000, "429");
    await expect(waiting[0]).resolves.toEqual({
      ok: false,
      code: "upstream_rate_limited",
      retryAfterSeconds: 5,
    });
    expect(pacer.acquire("k")).toEqual({
      ok: false,
      code: "upstream_rate_limited",
      retryAfterSeconds: 5,
    });
  });

  it("shares a pause between pacers whose upstreams use one credential", async () => {
    const clock = new FakeClock();
    const pauses = createPauseTable();
    const a = createLocalPacer({ waitMs: 0, clock, pauses, pauseKey: "cred-1" });
    const b = createLocalPacer({ waitMs: 0, clock, pauses, pauseKey: "cred-1" });
    const c = createLocalPacer({ waitMs: 0, clock, pauses, pauseKey: "cred-2" });
    a.pause(clock.now() + 3_000, "429");
    expect(b.acquire("k")).toMatchObject({ ok: false, code: "upstream_rate_limited" });
    expect(c.acquire("k")).toMatchObject({ ok: true });
  });
});

describe("pausing on a real upstream's 429", () => {
  let upstream: LimitedUpstream;
  let agent: Agent;
  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startLimitedUpstream({ cert: pki.good, limit: 3, retryAfter: "date" });
    agent = new Agent({ connections: 4, connect: { ca: pki.caPem } });
  });
  afterAll(async () => {
    await agent?.close();
    await upstream?.close();
  });

  it("sends nothing until the HTTP-date in Retry-After", async () => {
    // No rate limit of our own: only the upstream's answer slows us down.
    const pacer = createLocalPacer({ waitMs: 5_000 });
    const send = async () => {
      const admission = await pacer.acquire("reports");
      expect(admission.ok).toBe(true);
      const res = await request(`${upstream.origin}/`, { dispatcher: agent });
      await res.body.dump();
      if (res.statusCode === 429) {
        const delayMs = parseRetryAfter(res.headers["retry-after"], Date.now());
        if (delayMs !== undefined) pacer.pause(performance.now() + delayMs, "429");
      }
      return res.statusCode;
    };
    const first = await Promise.all([send(), send(), send(), send()]);
    expect(first.filter((s) => s === 429)).toHaveLength(1);
    const pausedAt = performance.now();
    const pausedForMs = pacer.state().pausedForMs;
    // An HTTP-date has whole seconds: the pause ends up to 2 s from now.
    expect(pausedForMs).toBeGreaterThan(0);
    const arrivalsBefore = upstream.arrivals.length;
    // Retry-After promised one free slot (the oldest accepted request leaving the window).
    expect(await send()).toBe(200);
    const after = upstream.arrivals.slice(arrivalsBefore);
    for (const arrival of after) expect(arrival).toBeGreaterThanOrEqual(pausedAt + pausedForMs - 1);
    pacer.close();
  });
});
