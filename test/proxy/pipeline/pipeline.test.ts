/**
 * The pipeline driver (src/proxy/pipeline/pipeline.ts): stages run in order, each once per
 * request; a stage that waits passes the request on later and the walk resumes where it was; a
 * stage that throws costs that one request a 500 `internal_error` (connection closed, the
 * error logged with the stage's name) and never reaches whoever started the walk; an answered
 * request is not walked further.
 */
import { describe, expect, it } from "vitest";
import { type Flow, Pipeline, type Stage } from "../../../src/proxy/pipeline/pipeline.js";
import type { ProxiedRequest } from "../../../src/proxy/proxied-request.js";
import {
  deferred,
  errorBody,
  flushPromises,
  RecordingContext,
  recordingLogger,
  TestRequest,
} from "../support/pipeline-fakes.js";

/** A stage that records each request it sees and passes it on at once. */
class PassStage implements Stage {
  readonly seen: ProxiedRequest[] = [];

  constructor(
    readonly name: string,
    private readonly order: string[],
  ) {}

  run(request: ProxiedRequest, flow: Flow): void {
    this.seen.push(request);
    this.order.push(this.name);
    flow.next(request);
  }
}

/** A stage that holds each request until the test releases it. */
class WaitingStage implements Stage {
  readonly name = "waits";
  readonly waiting: { request: ProxiedRequest; release: () => void }[] = [];

  constructor(private readonly order: string[]) {}

  run(request: ProxiedRequest, flow: Flow): void {
    this.order.push(this.name);
    const gate = deferred<void>();
    void gate.promise.then(() => flow.next(request));
    this.waiting.push({ request, release: () => gate.resolve() });
  }
}

function pipelineOf(stages: Stage[]) {
  const { logger, logs } = recordingLogger();
  return { pipeline: new Pipeline(stages, logger), logs };
}

describe("Pipeline", () => {
  it("runs every stage once, in order, synchronously from start()", () => {
    const order: string[] = [];
    const stages = ["guard", "route", "token", "exchange"].map((n) => new PassStage(n, order));
    const { pipeline } = pipelineOf(stages);
    const test = new TestRequest();

    pipeline.start(test.request);

    expect(order).toEqual(["guard", "route", "token", "exchange"]);
    for (const stage of stages) expect(stage.seen).toEqual([test.request]);
    // Passing the last stage is the end of the walk, not an answer.
    expect(test.request.answered).toBe(false);
    expect(test.fails).toEqual([]);
  });

  it("resumes after a stage that waits, at the next stage, and not before", async () => {
    const order: string[] = [];
    const waiting = new WaitingStage(order);
    const after = new PassStage("after", order);
    const { pipeline } = pipelineOf([new PassStage("before", order), waiting, after]);
    const test = new TestRequest();

    pipeline.start(test.request);
    await flushPromises();
    expect(order).toEqual(["before", "waits"]);
    expect(after.seen).toEqual([]);

    waiting.waiting[0]!.release();
    await flushPromises();
    expect(order).toEqual(["before", "waits", "after"]);
    expect(after.seen).toEqual([test.request]);
  });

  it("keeps each request's place: one waiting does not move another one along", async () => {
    const order: string[] = [];
    const first = new PassStage("first", order);
    const waiting = new WaitingStage(order);
    const last = new PassStage("last", order);
    const { pipeline } = pipelineOf([first, waiting, last]);
    const a = new TestRequest();
    const b = new TestRequest();

    pipeline.start(a.request);
    pipeline.start(b.request);
    // b goes on first, then a: each resumes right after the waiting stage.
    waiting.waiting[1]!.release();
    await flushPromises();
    waiting.waiting[0]!.release();
    await flushPromises();

    expect(first.seen).toEqual([a.request, b.request]);
    expect(last.seen).toEqual([b.request, a.request]);
    expect(order).toEqual(["first", "waits", "first", "waits", "last", "last"]);
  });

  it("a throwing stage costs its request a 500 internal_error, closes the connection, and throws nothing at the caller", () => {
    const order: string[] = [];
    const after = new PassStage("after", order);
    const throwing: Stage = {
      name: "broken",
      run() {
        throw new Error("registry exploded: secret-ish detail");
      },
    };
    const { pipeline, logs } = pipelineOf([new PassStage("before", order), throwing, after]);
    const test = new TestRequest();

    expect(() => pipeline.start(test.request)).not.toThrow();

    expect(after.seen).toEqual([]);
    const answer = test.answer();
    expect(answer.status).toBe(500);
    expect(answer.headers.get("connection")).toEqual(["close"]);
    expect(answer.headers.get("bearer-proxy-error")).toEqual(["internal_error"]);
    // The client learns nothing of the failure's details.
    expect(errorBody(answer)).toMatchObject({ code: "internal_error", message: "internal error" });
    expect(answer.body).not.toContain("registry exploded");
    const record = test.record();
    expect(record).toMatchObject({ status: 500, errorCode: "internal_error" });
    expect((record.cause as Error).message).toContain("registry exploded");
    // The log names the stage, so the bug can be found.
    const logged = logs.find((l) => l.msg === "request pipeline failed");
    expect(logged).toMatchObject({ level: "error", stage: "broken", upstream: "none" });
  });

  it("a stage that throws after its wait (inside flow.next) costs the request too, not the process", async () => {
    const order: string[] = [];
    const waiting = new WaitingStage(order);
    const throwing: Stage = {
      name: "after-wait",
      run() {
        throw new Error("boom");
      },
    };
    const { pipeline, logs } = pipelineOf([waiting, throwing]);
    const test = new TestRequest();

    pipeline.start(test.request);
    waiting.waiting[0]!.release();
    await flushPromises();

    expect(test.answer().status).toBe(500);
    expect(test.record().errorCode).toBe("internal_error");
    expect(logs.filter((l) => l.stage === "after-wait")).toHaveLength(1);
  });

  it("an answered request stops the walk: a stage that answers ends it", () => {
    const order: string[] = [];
    const answering: Stage = {
      name: "guard",
      run(request) {
        order.push("guard");
        request.fail("bad_request", "no");
      },
    };
    const after = new PassStage("route", order);
    const { pipeline } = pipelineOf([answering, after]);
    const test = new TestRequest();

    pipeline.start(test.request);

    expect(order).toEqual(["guard"]);
    expect(after.seen).toEqual([]);
    expect(test.answer().status).toBe(400);
  });

  it("an answered request stops the walk: a client gone while a stage waited is not passed on", async () => {
    const order: string[] = [];
    const waiting = new WaitingStage(order);
    const after = new PassStage("after", order);
    const { pipeline } = pipelineOf([waiting, after]);
    const ctx = new RecordingContext();
    const test = new TestRequest({ ctx });

    pipeline.start(test.request);
    test.request.clientClosed();
    waiting.waiting[0]!.release();
    await flushPromises();

    expect(after.seen).toEqual([]);
    expect(test.record()).toMatchObject({ status: 499, errorCode: "client_closed" });
    expect(test.answers()).toEqual([]);
  });

  it("a request answered before start() is not walked at all", () => {
    const order: string[] = [];
    const first = new PassStage("first", order);
    const { pipeline } = pipelineOf([first]);
    const test = new TestRequest();
    test.request.fail("overloaded", "busy");

    pipeline.start(test.request);

    expect(first.seen).toEqual([]);
  });

  it("passing the last stage, or a pipeline of none, is a no-op", () => {
    const { pipeline } = pipelineOf([]);
    const test = new TestRequest();
    expect(() => pipeline.start(test.request)).not.toThrow();
    expect(() => pipeline.next(test.request)).not.toThrow();
    expect(test.request.answered).toBe(false);
  });
});
