/**
 * The caller stage (src/proxy/pipeline/caller-stage.ts): asks the caller gate about the routed
 * upstream and the client request; an allowed caller goes on (at once for a cached verdict,
 * after the check for a new credential) with its identity recorded; a refused one is answered
 * with the gate's code, challenges and Retry-After, and still named in the access line; a
 * client gone while its credential was checked is left alone.
 */
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import type { CallerGate, GateVerdict } from "../../../src/callers/caller-gate.js";
import { CallerStage } from "../../../src/proxy/pipeline/caller-stage.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import {
  deferred,
  flushPromises,
  makeRoute,
  RecordingFlow,
  TestRequest,
} from "../support/pipeline-fakes.js";

/** A gate that answers what the test says and records what it was asked. */
function gateAnswering(verdict: GateVerdict | Promise<GateVerdict>) {
  const asked: { upstream: string; req: IncomingMessage }[] = [];
  const gate: CallerGate = {
    check(upstream, req) {
      asked.push({ upstream, req });
      return verdict;
    },
    ready: () => Promise.resolve(),
  };
  return { gate, asked };
}

const route = makeRoute(makeUpstreamConfig("billing"));

function routed() {
  const test = new TestRequest({ rawHeaders: ["Host", "a", "Proxy-Authorization", "Basic eDp5"] });
  test.request.markRouted(route);
  return test;
}

const refusal: GateVerdict = {
  allowed: false,
  code: "caller_unauthenticated",
  message: "Proxy-Authorization required",
  headers: { "proxy-authenticate": ['Basic realm="bearer-proxy"', 'Bearer realm="bearer-proxy"'] },
  retryAfterSeconds: undefined,
  caller: "addr:10.0.0.9",
};

describe("CallerStage", () => {
  it("is named caller gate", () => {
    expect(new CallerStage(gateAnswering({ allowed: true, caller: undefined }).gate).name).toBe(
      "caller gate",
    );
  });

  it("asks the gate about the routed upstream and the client request", () => {
    const { gate, asked } = gateAnswering({ allowed: true, caller: undefined });
    const test = routed();
    new CallerStage(gate).run(test.request, new RecordingFlow());
    expect(asked).toEqual([{ upstream: "billing", req: test.req }]);
  });

  it("passes an allowed caller on at once when the verdict is at hand, naming it", () => {
    const { gate } = gateAnswering({ allowed: true, caller: "user:alice" });
    const test = routed();
    const flow = new RecordingFlow();
    new CallerStage(gate).run(test.request, flow);
    expect(flow.passed).toEqual([test.request]);
    expect(test.request.caller).toBe("user:alice");
  });

  it("answers a refused caller with the gate's code and challenges, and names it in the access line", () => {
    const { gate } = gateAnswering(refusal);
    const test = routed();
    const flow = new RecordingFlow();
    new CallerStage(gate).run(test.request, flow);
    expect(flow.passed).toEqual([]);
    const answer = test.answer();
    expect(answer.status).toBe(407);
    expect(answer.headers.get("proxy-authenticate")).toEqual([
      'Basic realm="bearer-proxy"',
      'Bearer realm="bearer-proxy"',
    ]);
    expect(test.record()).toMatchObject({
      status: 407,
      errorCode: "caller_unauthenticated",
      caller: "addr:10.0.0.9",
      upstream: "billing",
    });
  });

  it("passes the gate's Retry-After on (a throttled address)", () => {
    const { gate } = gateAnswering({
      allowed: false,
      code: "caller_throttled",
      message: "too many failures",
      headers: undefined,
      retryAfterSeconds: 30,
      caller: "addr:10.0.0.9",
    });
    const test = routed();
    new CallerStage(gate).run(test.request, new RecordingFlow());
    expect(test.answer().status).toBe(429);
    expect(test.answer().headers.get("retry-after")).toEqual(["30"]);
  });

  it("waits for a verdict still being checked, then goes on", async () => {
    const verdict = deferred<GateVerdict>();
    const { gate } = gateAnswering(verdict.promise);
    const test = routed();
    const flow = new RecordingFlow();
    new CallerStage(gate).run(test.request, flow);
    await flushPromises();
    expect(flow.passed).toEqual([]);

    verdict.resolve({ allowed: true, caller: "sa:ns/app" });
    await flushPromises();
    expect(flow.passed).toEqual([test.request]);
    expect(test.request.caller).toBe("sa:ns/app");
  });

  it("answers a refusal that comes after the check", async () => {
    const verdict = deferred<GateVerdict>();
    const { gate } = gateAnswering(verdict.promise);
    const test = routed();
    new CallerStage(gate).run(test.request, new RecordingFlow());
    verdict.resolve(refusal);
    await flushPromises();
    expect(test.answer().status).toBe(407);
  });

  it("leaves a request alone whose client left while its credential was checked", async () => {
    const verdict = deferred<GateVerdict>();
    const { gate } = gateAnswering(verdict.promise);
    const test = routed();
    const flow = new RecordingFlow();
    new CallerStage(gate).run(test.request, flow);
    test.request.clientClosed();

    verdict.resolve(refusal);
    await flushPromises();
    expect(flow.passed).toEqual([]);
    expect(test.fails).toEqual([]);
    expect(test.answers()).toEqual([]);
    expect(test.record()).toMatchObject({ status: 499, errorCode: "client_closed" });
  });
});
