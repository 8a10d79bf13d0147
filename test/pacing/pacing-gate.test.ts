/**
 * Issue 26 (and the upgrade follow-up): the pacing gate that plain requests and Upgrade
 * handshakes both pass (src/proxy/pacing/gate.ts), on a fake clock: which budget a request
 * spends, a free turn at once, a wait that ends in a turn (with a fresher token), a refusal with
 * its Retry-After and RateLimit fields, a hang-up that ends the wait silently, the pacer closing
 * under a waiting request, and a failure after the wait answered instead of thrown.
 */
import { describe, expect, it } from "vitest";
import type { RateLimitConfig } from "../../src/config/types.js";
import type { ProxyErrorCode } from "../../src/errors.js";
import { createMetrics } from "../../src/observability/metrics.js";
import { budgetKey, type GateRefusal, passGate } from "../../src/proxy/pacing/gate.js";
import { createLocalPacer } from "../../src/proxy/pacing/local-pacer.js";
import {
  createUpstreamPacing,
  type UpstreamPacing,
} from "../../src/proxy/pacing/upstream-pacing.js";
import { FakeClock } from "../token/fake-clock.js";

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
    retry: { attempts: 1, on: ["connect", "reset"], budgetPercent: 20 },
    metrics: createMetrics({ collectProcessMetrics: false }),
    now: () => clock.now(),
  });
}

/** A request at the gate that records what the gate told it. */
class Recorder {
  finished = false;
  waits = 0;
  afterWaits = 0;
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
    passGate(request, pacing, "reports");
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
    passGate(new Recorder(), pacing, "reports");
    const second = new Recorder();
    passGate(second, pacing, "reports");
    expect(second.waits).toBe(1);
    expect(second.finished).toBe(false);
    await clock.advance(100);
    expect(second.afterWaits).toBe(1);
    expect(second.proceeded).toMatchObject({ key: "reports", waitedMs: 100 });
  });

  it("refuses a request whose turn is beyond wait: 429 with Retry-After and the RateLimit fields", () => {
    const pacing = pacingOn(new FakeClock(), LIMIT);
    for (let i = 0; i < 3; i++) passGate(new Recorder(), pacing, "reports");
    // Two wait (100 and 200 ms); the next turn is 300 ms away, past the 250 ms wait.
    const late = new Recorder();
    passGate(late, pacing, "reports");
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
    passGate(new Recorder(), pacing, "reports");
    const gone = new Recorder();
    passGate(gone, pacing, "reports");
    const next = new Recorder();
    passGate(next, pacing, "reports");
    gone.hangUp();
    await clock.advance(100);
    expect(gone.proceeded).toBeUndefined();
    expect(gone.refused).toBeUndefined();
    // The turn the hang-up freed went to the next in line.
    expect(next.proceeded).toMatchObject({ waitedMs: 100 });
    expect(pacing.pacer.state().queued).toBe(0);
  });

  it("answers 503 shutting_down when the pacer closes under a waiting request", async () => {
    const pacing = pacingOn(new FakeClock(), LIMIT);
    passGate(new Recorder(), pacing, "reports");
    const waiting = new Recorder();
    passGate(waiting, pacing, "reports");
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
    passGate(request, pacing, "reports");
    expect(request.refused).toMatchObject({
      code: "upstream_rate_limited",
      refusal: { retryAfterSeconds: 60, headers: undefined },
    });
  });

  it("answers internal_error when going on after a wait fails, instead of an unhandled rejection", async () => {
    const clock = new FakeClock();
    const pacing = pacingOn(clock, LIMIT);
    passGate(new Recorder(), pacing, "reports");
    const broken = new Recorder();
    broken.failOnProceed = new Error("a bug past the wait");
    passGate(broken, pacing, "reports");
    await clock.advance(100);
    expect(broken.refused).toMatchObject({
      code: "internal_error",
      refusal: { cause: broken.failOnProceed },
    });
  });
});
