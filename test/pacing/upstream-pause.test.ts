/**
 * Issue 26: an upstream's 429/503 with Retry-After (delta-seconds or HTTP-date) pauses its
 * pacer: waiting requests and new arrivals wait within `wait`, the rest get 429
 * `upstream_rate_limited` with the remaining time, and nothing reaches the upstream meanwhile.
 * Holds with or without a rate limit of our own.
 */
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Admission } from "../../src/pacing/limiter.js";
import { createLocalPacer } from "../../src/pacing/local-pacer.js";
import {
  createEntryPauses,
  createPauseTable,
  entryPauseKey,
  type PauseTable,
  pauseFromRetryAfter,
} from "../../src/pacing/pause.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { type LimitedUpstream, startLimitedUpstream } from "../helpers/limited-upstream.js";
import { createTestPki } from "../helpers/tls.js";

const NOW_WALL_MS = Date.UTC(2026, 10, 22, 12, 0, 0);
/** `rateLimit.maxPause` as the tests of the parser use it. */
const MAX_PAUSE_MS = 10 * 60_000;

describe("pauseFromRetryAfter", () => {
  it("pauses for the header's wait (base/retry-after.ts reads it)", () => {
    expect(pauseFromRetryAfter("120", NOW_WALL_MS, MAX_PAUSE_MS)).toBe(120_000);
    expect(pauseFromRetryAfter(["3", "9"], NOW_WALL_MS, MAX_PAUSE_MS)).toBe(3_000);
    expect(pauseFromRetryAfter("Sun, 22 Nov 2026 12:00:30 GMT", NOW_WALL_MS, MAX_PAUSE_MS)).toBe(
      30_000,
    );
  });

  it("caps long pauses at maxPause, ignores what it can't read", () => {
    expect(pauseFromRetryAfter("Sun, 22 Nov 2026 11:00:00 GMT", NOW_WALL_MS, MAX_PAUSE_MS)).toBe(0);
    expect(pauseFromRetryAfter("86400", NOW_WALL_MS, MAX_PAUSE_MS)).toBe(10 * 60_000);
    expect(pauseFromRetryAfter("31536000", NOW_WALL_MS, 60_000)).toBe(60_000);
    expect(pauseFromRetryAfter("Mon, 22 Nov 2027 12:00:00 GMT", NOW_WALL_MS, 60_000)).toBe(60_000);
    // maxPause 0: an answer never pauses.
    expect(pauseFromRetryAfter("30", NOW_WALL_MS, 0)).toBe(0);
    for (const bad of ["", "-1", "1.5", "soon", "Sun, 31 Feb 2026 12:00:00 GMT", undefined]) {
      expect(pauseFromRetryAfter(bad, NOW_WALL_MS, MAX_PAUSE_MS)).toBeUndefined();
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

  /** A pacer for entry `name` spending `credential`, its answers pausing by `scope`. */
  function entryPacer(
    table: PauseTable,
    clock: FakeClock,
    name: string,
    credential: string,
    scope: "upstream" | "credential",
    waitMs = 0,
  ) {
    const keys = { entry: entryPauseKey(name), credential, scope };
    return createLocalPacer({ waitMs, clock, pauses: createEntryPauses(table, keys) });
  }

  it("pauseScope upstream (the default): one entry's answer pauses that entry alone", () => {
    const clock = new FakeClock();
    const table = createPauseTable();
    const a = entryPacer(table, clock, "a", "cred-1", "upstream");
    const b = entryPacer(table, clock, "b", "cred-1", "upstream");
    a.pause(clock.now() + 3_000, "429");
    expect(a.acquire("k")).toMatchObject({ ok: false, code: "upstream_rate_limited" });
    expect(b.acquire("k")).toMatchObject({ ok: true });
    expect(b.state().pausedForMs).toBe(0);
  });

  it("pauseScope credential: one entry's answer pauses every entry spending its credential", () => {
    const clock = new FakeClock();
    const table = createPauseTable();
    const a = entryPacer(table, clock, "a", "cred-1", "credential");
    // b declared the narrower scope, but the answer a received speaks for the credential.
    const b = entryPacer(table, clock, "b", "cred-1", "upstream");
    const c = entryPacer(table, clock, "c", "cred-2", "credential");
    a.pause(clock.now() + 3_000, "429");
    expect(b.acquire("k")).toMatchObject({ ok: false, code: "upstream_rate_limited" });
    expect(b.state()).toMatchObject({ pausedForMs: 3_000, pauseReason: "429" });
    expect(c.acquire("k")).toMatchObject({ ok: true });
    // b's own answers stay its own.
    b.pause(clock.now() + 9_000, "503");
    expect(a.state()).toMatchObject({ pausedForMs: 3_000, pauseReason: "429" });
    expect(b.state()).toMatchObject({ pausedForMs: 9_000, pauseReason: "503" });
  });

  it("tells a neighbour's waiting requests at once when a credential pause outlasts their wait", async () => {
    const clock = new FakeClock();
    const table = createPauseTable();
    const a = entryPacer(table, clock, "a", "cred-1", "credential", 1_000);
    const b = entryPacer(table, clock, "b", "cred-1", "upstream", 1_000);
    b.pause(clock.now() + 500, "429");
    const waiting = b.acquire("k") as Promise<Admission>;
    expect(b.state().queued).toBe(1);
    a.pause(clock.now() + 5_000, "429");
    await expect(waiting).resolves.toEqual({
      ok: false,
      code: "upstream_rate_limited",
      retryAfterSeconds: 5,
    });
    expect(b.state().queued).toBe(0);
    a.close();
    b.close();
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
        const delayMs = pauseFromRetryAfter(res.headers["retry-after"], Date.now(), 60_000);
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
