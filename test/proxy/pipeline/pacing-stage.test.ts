/**
 * The pacing stage (src/proxy/pipeline/pacing-stage.ts): an upstream without pacing is passed
 * at once; otherwise the request asks the upstream's pacer for a turn on its budget (the
 * upstream's, or its caller's — the identified caller, else the peer address); a free turn goes
 * on at once with the budget and the RateLimit value it will answer with; a refused one is
 * answered 429 with Retry-After and the RateLimit fields; one that waits goes on when its turn
 * comes, with the token refreshed (a long wait may outlive it) and the time it waited; a client
 * hanging up ends the wait.
 */
import { describe, expect, it } from "vitest";
import { createWaitingRoom } from "../../../src/base/waiting-room.js";
import type { UpstreamConfig } from "../../../src/config/proxy-config.js";
import type { Admission } from "../../../src/pacing/limiter.js";
import { PacingStage } from "../../../src/proxy/pipeline/pacing-stage.js";
import { makeProxyConfig, makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { createStubTokens } from "../stub-tokens.js";
import {
  deferred,
  errorBody,
  FREE_TURN,
  flushPromises,
  makePacing,
  makeRoute,
  RecordingFlow,
  ScriptedPacer,
  TestRequest,
  testToken,
} from "../support/pipeline-fakes.js";

const limited = makeUpstreamConfig("limited", {
  rateLimit: { requests: 10, per: "1s", wait: "2s" },
});
const perCaller = makeUpstreamConfig("per-caller", {
  rateLimit: { requests: 10, per: "1s", by: "caller" },
});

function routed(config: UpstreamConfig, pacer = new ScriptedPacer()) {
  const tokens = createStubTokens();
  const route = makeRoute(config, { tokens, pacing: makePacing(config, pacer) });
  const test = new TestRequest({ remoteAddress: "10.1.2.3" });
  test.request.markRouted(route);
  test.request.token = testToken("held-since-the-token-stage");
  return { test, pacer, tokens };
}

function run(test: TestRequest) {
  const flow = new RecordingFlow();
  new PacingStage({ room: createWaitingRoom(), limits: makeProxyConfig([]).limits }).run(
    test.request,
    flow,
  );
  return flow;
}

describe("PacingStage", () => {
  it("is named pacing turn", () => {
    expect(
      new PacingStage({ room: createWaitingRoom(), limits: makeProxyConfig([]).limits }).name,
    ).toBe("pacing turn");
  });

  it("passes a request at once when its upstream has no pacing", () => {
    const test = new TestRequest();
    test.request.markRouted(makeRoute(makeUpstreamConfig("free")));
    expect(run(test).passed).toEqual([test.request]);
    expect(test.request.paceKey).toBe("");
  });

  it("goes on at once with a free turn, spending the upstream's budget", () => {
    const { test, pacer } = routed(limited);
    const flow = run(test);
    expect(flow.passed).toEqual([test.request]);
    expect(pacer.acquisitions.map((a) => a.key)).toEqual(["limited"]);
    expect(test.request.paceKey).toBe("limited");
    // The admission's RateLimit value, answered with the response (remaining 9, reset 1 s).
    expect(test.request.rateLimit).toMatch(/r=9/);
    expect(test.request.waitMs).toBe(0);
    // No wait: no signal was made.
    expect(test.request.abortWait).toBeUndefined();
  });

  it("spends the caller's budget with rateLimit.by caller: the identified caller, else the peer", () => {
    const named = routed(perCaller);
    named.test.request.caller = "user:alice";
    run(named.test);
    expect(named.pacer.acquisitions[0]!.key).toBe("user:alice");
    expect(named.test.request.paceKey).toBe("user:alice");

    const anonymous = routed(perCaller);
    run(anonymous.test);
    expect(anonymous.pacer.acquisitions[0]!.key).toBe("addr:10.1.2.3");
  });

  it("answers a refused turn 429 with Retry-After and the RateLimit fields", () => {
    const pacer = new ScriptedPacer();
    pacer.answer = () => ({ ok: false, code: "rate_limited", retryAfterSeconds: 3 });
    const { test } = routed(limited, pacer);
    const flow = run(test);
    expect(flow.passed).toEqual([]);
    const answer = test.answer();
    expect(answer.status).toBe(429);
    expect(answer.headers.get("retry-after")).toEqual(["3"]);
    expect(answer.headers.get("ratelimit-policy")?.[0]).toContain("q=10");
    expect(answer.headers.has("ratelimit")).toBe(true);
    expect(errorBody(answer).code).toBe("rate_limited");
  });

  it("goes on when a waited turn comes: the time waited counted, the token refreshed", async () => {
    const turn = deferred<Admission>();
    const pacer = new ScriptedPacer();
    pacer.answer = () => turn.promise;
    const { test, tokens } = routed(limited, pacer);
    const flow = run(test);
    await flushPromises();
    expect(flow.passed).toEqual([]);
    // Waiting: the hang-up signal was made on the request.
    expect(pacer.acquisitions[0]!.signal).toBe(test.request.abortWait?.signal);

    // A new token was fetched meanwhile (the one in hand may have expired).
    await tokens.getToken();
    turn.resolve({ ...FREE_TURN, waitedMs: 250 });
    await flushPromises();
    expect(flow.passed).toEqual([test.request]);
    expect(test.request.waitMs).toBe(250);
    expect(test.request.token?.value).toBe("stub-token-1");
  });

  it("keeps the token in hand after a wait when none is cached", async () => {
    const turn = deferred<Admission>();
    const pacer = new ScriptedPacer();
    pacer.answer = () => turn.promise;
    const { test } = routed(limited, pacer);
    run(test);
    turn.resolve(FREE_TURN);
    await flushPromises();
    expect(test.request.token?.value).toBe("held-since-the-token-stage");
  });

  it("answers a turn refused after a wait, counting the wait", async () => {
    const turn = deferred<Admission>();
    const pacer = new ScriptedPacer();
    pacer.answer = () => turn.promise;
    const { test } = routed(limited, pacer);
    const flow = run(test);
    turn.resolve({ ok: false, code: "upstream_rate_limited", retryAfterSeconds: 5 });
    await flushPromises();
    expect(flow.passed).toEqual([]);
    expect(test.answer().status).toBe(429);
    expect(test.record().errorCode).toBe("upstream_rate_limited");
    expect(test.record().waitMs).toBeGreaterThanOrEqual(0);
  });

  it("ends the wait when the client hangs up, answering nothing", async () => {
    const turn = deferred<Admission>();
    const pacer = new ScriptedPacer();
    pacer.answer = () => turn.promise;
    const { test } = routed(limited, pacer);
    const flow = run(test);
    test.request.clientClosed();
    expect(pacer.acquisitions[0]!.signal?.aborted).toBe(true);
    turn.reject(new Error("aborted"));
    await flushPromises();
    expect(flow.passed).toEqual([]);
    expect(test.answers()).toEqual([]);
    expect(test.record()).toMatchObject({ status: 499, errorCode: "client_closed" });
  });
});
