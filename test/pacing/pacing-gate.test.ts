/**
 * Issue 26 (and the upgrade follow-up): the pacing gate that plain requests and Upgrade
 * handshakes both pass (src/pacing/gate.ts), on a fake clock: which budget a request
 * spends, a free turn at once, a wait that ends in a turn (with a fresher token), a refusal with
 * its Retry-After and RateLimit fields, a hang-up that ends the wait silently, the pacer closing
 * under a waiting request, and a failure after the wait answered instead of thrown. Issue 30
 * item 3: a request that waits takes a place in the waiting room and leaves its load meanwhile;
 * with no place (limits.maxWaiting, maxWaitingPerCaller) it is answered 429 at once.
 */
import { beforeEach, describe, expect, it } from "vitest";
import { createWaitingRoom } from "../../src/base/waiting-room.js";
import type { RateLimitConfig } from "../../src/config/proxy-config.js";
import type { ProxyErrorCode } from "../../src/errors.js";
import { createMetrics } from "../../src/observability/metrics.js";
import {
  budgetKey,
  type GateRefusal,
  passGate,
  type WaitingPlaces,
} from "../../src/pacing/gate.js";
import { createLocalPacer } from "../../src/pacing/local-pacer.js";
import { createUpstreamPacing, type UpstreamPacing } from "../../src/pacing/upstream-pacing.js";
import { FakeClock } from "../helpers/fake-clock.js";

/** 10 per second, strictly even (one every 100 ms), up to 250 ms of wait. */
const LIMIT: RateLimitConfig = {
  requests: 10,
  perMs: 1_000,
  burst: 0,
  by: "upstream",
  scope: "local",
  waitMs: 250,
};

/** The gate's view of upstream "reports"; `rateLimit` undefined: only its pauses hold requests. */
function pacingOn(clock: FakeClock, rateLimit: RateLimitConfig | undefined) {
  const pacer = createLocalPacer({
    rate: rateLimit && { ...rateLimit, marginMs: 0 },
    waitMs: rateLimit?.waitMs ?? 250,
    clock,
  });
  return createUpstreamPacing({
    upstream: "reports",
    pacer,
    rateLimit,
    maxPauseMs: 60_000,
    retry: { attempts: 1, on: ["connect", "reset"], budgetPercent: 20 },
    metrics: createMetrics({ collectProcessMetrics: false }),
    now: () => clock.now(),
  });
}

/** A waiting room with generous bounds (`limits` may be changed by a test). */
function placesFor(limits = { maxWaiting: 10_000, maxWaitingPerCaller: 1_000 }): WaitingPlaces {
  return { room: createWaitingRoom(), limits };
}

/** A request at the gate that records what the gate told it. */
class Recorder {
  finished = false;
  waits = 0;
  afterWaits = 0;
  /** Counted in its load (maxInFlight): true on arrival, false while it waits. */
  inLoad = true;
  loadLeft = 0;
  loadResumed = 0;
  readonly peer: { remoteAddress: string };

  constructor(
    readonly caller: string | undefined = undefined,
    remoteAddress = "127.0.0.1",
  ) {
    this.peer = { remoteAddress };
  }

  leaveLoad(): void {
    this.inLoad = false;
    this.loadLeft++;
  }

  resumeLoad(): boolean {
    this.inLoad = true;
    this.loadResumed++;
    return true;
  }
  readonly controller = new AbortController();
  proceeded: { key: string; rateLimit: string | undefined; waitedMs: number } | undefined;
  refused: { code: ProxyErrorCode; message: string; refusal: GateRefusal } | undefined;
  /** Thrown by proceed, to stand for a bug past the wait. */
  failOnProceed: Error | undefined;

  waitSignal(): AbortSignal {
    this.waits++;
    return this.controller.signal;
  }

  afterWait(): void {
    this.afterWaits++;
  }

  proceed(_pacing: UpstreamPacing, key: string, rateLimit: string | undefined, waitedMs: number) {
    if (this.failOnProceed) throw this.failOnProceed;
    this.finished = true;
    this.proceeded = { key, rateLimit, waitedMs };
  }

  refuse(code: ProxyErrorCode, message: string, refusal: GateRefusal) {
    this.finished = true;
    this.refused = { code, message, refusal };
  }

  /** The client hung up: the request is finished, and the wait ends. */
  hangUp(): void {
    this.finished = true;
    this.controller.abort(new Error("client closed the connection"));
  }
}

describe("the pacing gate", () => {
  let places: WaitingPlaces;
  beforeEach(() => {
    places = placesFor();
  });

  it("spends the upstream's budget, or the caller's, else the peer's address", () => {
    const clock = new FakeClock();
    const byUpstream = pacingOn(clock, LIMIT);
    const byCaller = pacingOn(clock, { ...LIMIT, by: "caller" });
    const peer = { remoteAddress: "127.0.0.2" };
    expect(budgetKey(byUpstream, "user:alice", peer)).toBe("reports");
    expect(budgetKey(byCaller, "user:alice", peer)).toBe("user:alice");
    expect(budgetKey(byCaller, undefined, peer)).toBe("addr:127.0.0.2");
  });

  it("lets a free turn through at once, without a wait signal, with the RateLimit value", () => {
    const pacing = pacingOn(new FakeClock(), LIMIT);
    const request = new Recorder();
    passGate(request, pacing, "reports", places);
    expect(request.proceeded).toEqual({
      key: "reports",
      rateLimit: '"default";r=0;t=1',
      waitedMs: 0,
    });
    expect(request.waits).toBe(0);
    expect(request.afterWaits).toBe(0);
  });

  it("holds a request over the limit until its turn, then takes a fresher token", async () => {
    const clock = new FakeClock();
    const pacing = pacingOn(clock, LIMIT);
    passGate(new Recorder(), pacing, "reports", places);
    const second = new Recorder();
    passGate(second, pacing, "reports", places);
    expect(second.waits).toBe(1);
    expect(second.finished).toBe(false);
    // Waiting, it holds a place in the room and is out of its load (maxInFlight).
    expect(second.inLoad).toBe(false);
    expect(places.room.state()).toMatchObject({ waiting: 1, callers: 1 });
    await clock.advance(100);
    expect(second.afterWaits).toBe(1);
    expect(second.proceeded).toMatchObject({ key: "reports", waitedMs: 100 });
    // Its turn came: the place is given back and it counts in its load again, once.
    expect(second).toMatchObject({ inLoad: true, loadLeft: 1, loadResumed: 1 });
    expect(places.room.state()).toMatchObject({ waiting: 0, callers: 0 });
  });

  it("never takes a place for a free turn", () => {
    const pacing = pacingOn(new FakeClock(), LIMIT);
    const request = new Recorder();
    passGate(request, pacing, "reports", places);
    expect(request.proceeded).toBeDefined();
    expect(request.loadLeft).toBe(0);
    expect(places.room.waiting).toBe(0);
  });

  it("answers 429 rate_limited at once when limits.maxWaiting requests wait already", async () => {
    const clock = new FakeClock();
    const pacing = pacingOn(clock, { ...LIMIT, waitMs: 10_000 });
    places = placesFor({ maxWaiting: 3, maxWaitingPerCaller: 1_000 });
    passGate(new Recorder(), pacing, "reports", places);
    // Three callers wait (one each), filling the room.
    const waiting = ["a", "b", "c"].map((name) => new Recorder(`user:${name}`));
    for (const request of waiting) passGate(request, pacing, "reports", places);
    const refused = new Recorder("user:d");
    passGate(refused, pacing, "reports", places);
    expect(refused.refused).toMatchObject({
      code: "rate_limited",
      refusal: { retryAfterSeconds: 1, waitedMs: 0 },
    });
    expect(refused.refused?.message).toContain("limits.maxWaiting (3)");
    // It never left its load, and took no turn: the next in line is unaffected.
    expect(refused.loadLeft).toBe(0);
    expect(pacing.pacer.state().queued).toBe(3);
    await clock.advance(300);
    expect(waiting.map((r) => r.proceeded?.waitedMs)).toEqual([100, 200, 300]);
    expect(places.room.state()).toMatchObject({
      waiting: 0,
      refused: { max_waiting: 1, max_waiting_per_caller: 0 },
    });
  });

  it("answers 429 rate_limited at once when one caller has limits.maxWaitingPerCaller waiting", async () => {
    const clock = new FakeClock();
    const pacing = pacingOn(clock, { ...LIMIT, waitMs: 10_000 });
    places = placesFor({ maxWaiting: 100, maxWaitingPerCaller: 2 });
    passGate(new Recorder(), pacing, "reports", places);
    // No caller identified: the peer address is the caller.
    for (let i = 0; i < 2; i++)
      passGate(new Recorder(undefined, "10.0.0.7"), pacing, "reports", places);
    const third = new Recorder(undefined, "10.0.0.7");
    passGate(third, pacing, "reports", places);
    expect(third.refused).toMatchObject({ code: "rate_limited" });
    expect(third.refused?.message).toContain("limits.maxWaitingPerCaller (2)");
    // Another caller still gets a place.
    const other = new Recorder(undefined, "10.0.0.8");
    passGate(other, pacing, "reports", places);
    expect(other.finished).toBe(false);
    expect(places.room.state()).toMatchObject({ waiting: 3, callers: 2, mostByOneCaller: 2 });
    await clock.advance(300);
    expect(other.proceeded).toMatchObject({ waitedMs: 300 });
  });

  it("refuses a request whose turn is beyond wait: 429 with Retry-After and the RateLimit fields", () => {
    const pacing = pacingOn(new FakeClock(), LIMIT);
    for (let i = 0; i < 3; i++) passGate(new Recorder(), pacing, "reports", places);
    // Two wait (100 and 200 ms); the next turn is 300 ms away, past the 250 ms wait.
    const late = new Recorder();
    passGate(late, pacing, "reports", places);
    expect(late.proceeded).toBeUndefined();
    expect(late.refused).toMatchObject({
      code: "rate_limited",
      refusal: {
        retryAfterSeconds: 1,
        headers: { "ratelimit-policy": '"default";q=10;w=1', ratelimit: '"default";r=0;t=1' },
        waitedMs: 0,
      },
    });
    expect(late.refused?.message).toContain("upstream reports is rate limited");
  });

  it("ends the wait on a hang-up and answers nothing (the request answered its client)", async () => {
    const clock = new FakeClock();
    const pacing = pacingOn(clock, LIMIT);
    passGate(new Recorder(), pacing, "reports", places);
    const gone = new Recorder();
    passGate(gone, pacing, "reports", places);
    const next = new Recorder();
    passGate(next, pacing, "reports", places);
    gone.hangUp();
    await clock.advance(100);
    expect(gone.proceeded).toBeUndefined();
    expect(gone.refused).toBeUndefined();
    // Its place went back; it is not counted in its load again (it is over).
    expect(gone.loadResumed).toBe(0);
    // The turn the hang-up freed went to the next in line.
    expect(next.proceeded).toMatchObject({ waitedMs: 100 });
    expect(pacing.pacer.state().queued).toBe(0);
    expect(places.room.waiting).toBe(0);
  });

  it("answers 503 shutting_down when the pacer closes under a waiting request", async () => {
    const pacing = pacingOn(new FakeClock(), LIMIT);
    passGate(new Recorder(), pacing, "reports", places);
    const waiting = new Recorder();
    passGate(waiting, pacing, "reports", places);
    pacing.pacer.close();
    await Promise.resolve();
    await Promise.resolve();
    expect(waiting.refused).toMatchObject({
      code: "shutting_down",
      refusal: { retryAfterSeconds: 1 },
    });
  });

  it("advertises nothing for an upstream without a rateLimit", () => {
    const clock = new FakeClock();
    const pacing = pacingOn(clock, undefined);
    pacing.pacer.pause(clock.now() + 60_000, "429");
    const request = new Recorder();
    passGate(request, pacing, "reports", places);
    expect(request.refused).toMatchObject({
      code: "upstream_rate_limited",
      refusal: { retryAfterSeconds: 60, headers: undefined },
    });
  });

  it("answers internal_error when going on after a wait fails, instead of an unhandled rejection", async () => {
    const clock = new FakeClock();
    const pacing = pacingOn(clock, LIMIT);
    passGate(new Recorder(), pacing, "reports", places);
    const broken = new Recorder();
    broken.failOnProceed = new Error("a bug past the wait");
    passGate(broken, pacing, "reports", places);
    await clock.advance(100);
    expect(broken.refused).toMatchObject({
      code: "internal_error",
      refusal: { cause: broken.failOnProceed },
    });
  });
});
