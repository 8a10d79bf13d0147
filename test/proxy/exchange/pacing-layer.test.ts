/**
 * The pacing layer (src/proxy/exchange/pacing-layer.ts), in a real exchange with the product's
 * UpstreamPacing around a scripted pacer: a 429 or 503 with Retry-After — delta-seconds or an
 * HTTP-date — pauses the upstream's pacer for that long and marks the exchange paused (so no
 * retry goes past it), the answer itself relayed; anything else pauses nothing. A resend takes
 * a turn on the request's budget like a first attempt: a free turn sends it (the wait counted),
 * a refused one, a failed wait, or one that comes after the exchange ended does not.
 */
import { describe, expect, it } from "vitest";
import type { Admission } from "../../../src/pacing/limiter.js";
import { PacingLayer } from "../../../src/proxy/exchange/pacing-layer.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import {
  deferred,
  exchangeRig,
  FREE_TURN,
  flushPromises,
  makePacing,
  PACER_NOW_MS,
  ScriptedPacer,
} from "../support/pipeline-fakes.js";

const config = makeUpstreamConfig("limited", { rateLimit: { requests: 5, per: "1s" } });

function rig() {
  const pacer = new ScriptedPacer();
  const pacing = makePacing(config, pacer);
  const r = exchangeRig(config, { pacing });
  const layer = new PacingLayer(r.sink, pacing, r.exchange);
  r.start({ head: layer, pacing: layer });
  return { ...r, pacer, layer };
}

describe("PacingLayer", () => {
  it("pauses the pacer for a 429's Retry-After in seconds, marks the exchange paused, and relays the 429", () => {
    const r = rig();
    r.dispatcher.last.connect();
    r.dispatcher.last.head(429, { "retry-after": "2" });
    expect(r.pacer.pauses).toEqual([{ untilMs: PACER_NOW_MS + 2_000, reason: "429" }]);
    expect(r.exchange.paused).toBe(true);
    expect(r.sink.statuses()).toEqual([429]);
  });

  it("reads a 503's Retry-After as an HTTP-date", () => {
    const r = rig();
    const at = new Date(Date.now() + 30_000).toUTCString();
    r.dispatcher.last.connect();
    r.dispatcher.last.head(503, { "Retry-After": at });
    expect(r.pacer.pauses).toHaveLength(1);
    const pause = r.pacer.pauses[0]!;
    expect(pause.reason).toBe("503");
    // The date has whole seconds: between 29 and 30 s from now.
    expect(pause.untilMs - PACER_NOW_MS).toBeGreaterThan(28_000);
    expect(pause.untilMs - PACER_NOW_MS).toBeLessThanOrEqual(30_000);
    expect(r.exchange.paused).toBe(true);
  });

  it("pauses nothing without a usable Retry-After, or for another status", () => {
    const cases: [number, Record<string, string>][] = [
      [429, {}],
      [429, { "retry-after": "0" }],
      [503, { "retry-after": "soon" }],
      [503, { "retry-after": new Date(Date.now() - 60_000).toUTCString() }],
      [500, { "retry-after": "5" }],
      [200, { "retry-after": "5" }],
    ];
    for (const [status, headers] of cases) {
      const r = rig();
      r.dispatcher.last.connect();
      r.dispatcher.last.head(status, headers);
      expect(r.pacer.pauses, `${status} ${JSON.stringify(headers)}`).toEqual([]);
      expect(r.exchange.paused).toBe(false);
      expect(r.sink.statuses()).toEqual([status]);
    }
  });

  it("a new attempt is no longer paused", () => {
    const r = rig();
    r.dispatcher.last.connect();
    r.dispatcher.last.head(429, { "retry-after": "1" });
    r.exchange.resendNow(false);
    expect(r.exchange.paused).toBe(false);
  });

  it("sends a resend in a free turn, on the request's budget, counting the wait", () => {
    const r = rig();
    r.test.request.paceKey = "user:alice";
    r.pacer.answer = () => ({ ...FREE_TURN, waitedMs: 40 });
    r.exchange.resend({ waitMs: 0 }, () => {
      throw new Error("a turn was given");
    });
    expect(r.pacer.acquisitions).toEqual([{ key: "user:alice", waitMs: 0, signal: undefined }]);
    expect(r.dispatcher.attempts).toHaveLength(2);
    expect(r.test.request.waitMs).toBe(40);
  });

  it("spends the upstream's budget when the request has no key of its own", () => {
    const r = rig();
    r.exchange.resend({ waitMs: undefined }, () => {});
    expect(r.pacer.acquisitions[0]).toMatchObject({ key: "limited", waitMs: undefined });
  });

  it("answers noTurn when the turn is refused, sending nothing", () => {
    const r = rig();
    r.pacer.answer = () => ({ ok: false, code: "rate_limited", retryAfterSeconds: 1 });
    let noTurns = 0;
    r.exchange.resend({ waitMs: 0 }, () => noTurns++);
    expect(noTurns).toBe(1);
    expect(r.dispatcher.attempts).toHaveLength(1);
  });

  it("sends a resend whose turn comes later, the wait ended by a hang-up", async () => {
    const r = rig();
    const turn = deferred<Admission>();
    r.pacer.answer = () => turn.promise;
    r.exchange.resend({ waitMs: undefined }, () => {});
    // Waiting: the signal is the exchange's resend signal.
    expect(r.pacer.acquisitions[0]!.signal).toBe(r.exchange.resendSignal());
    expect(r.dispatcher.attempts).toHaveLength(1);
    turn.resolve({ ...FREE_TURN, waitedMs: 120 });
    await flushPromises();
    expect(r.dispatcher.attempts).toHaveLength(2);
    expect(r.test.request.waitMs).toBe(120);
  });

  it("answers noTurn when the wait fails (the pacer closed) and the exchange still runs", async () => {
    const r = rig();
    const turn = deferred<Admission>();
    r.pacer.answer = () => turn.promise;
    let noTurns = 0;
    r.exchange.resend({ waitMs: undefined }, () => noTurns++);
    turn.reject(new Error("pacer closed"));
    await flushPromises();
    expect(noTurns).toBe(1);
    expect(r.dispatcher.attempts).toHaveLength(1);
  });

  it("does nothing when the turn comes after the exchange ended (the client left)", async () => {
    const r = rig();
    const turn = deferred<Admission>();
    r.pacer.answer = () => turn.promise;
    let noTurns = 0;
    r.exchange.resend({ waitMs: undefined }, () => noTurns++);
    r.test.request.clientClosed();
    expect(r.pacer.acquisitions[0]!.signal?.aborted).toBe(true);
    turn.resolve(FREE_TURN);
    await flushPromises();
    expect(noTurns).toBe(0);
    expect(r.dispatcher.attempts).toHaveLength(1);
  });
});
