/**
 * The request value and its error boundary (src/proxy/proxied-request.ts): `fail` answers with
 * the error contract (status, `bearer-proxy-error`, JSON naming the upstream once routed,
 * Retry-After, extra headers) and closes the connection when asked, while draining, or when a
 * body is left unread; once a response has started it cuts the connection instead. Every
 * request finishes exactly once — one access record, one `onFinished`, its SERVER span ended
 * once (at the 101 for an upgrade) — and a hang-up stops whoever works on it.
 */
import { describe, expect, it } from "vitest";
import { makeUpstreamConfig } from "../helpers/upstream-config.js";
import {
  errorBody,
  makeRoute,
  RecordingContext,
  type RecordingServerSpan,
  RecordingTracing,
  TestRequest,
} from "./support/pipeline-fakes.js";

function traced(options: ConstructorParameters<typeof TestRequest>[0] = {}) {
  const tracing = new RecordingTracing();
  const test = new TestRequest({ ...options, ctx: new RecordingContext(tracing) });
  const span = () => tracing.servers[0] as RecordingServerSpan;
  return { test, span };
}

describe("ProxiedRequest", () => {
  it("fails with the error contract, once, and finishes once", () => {
    const { test, span } = traced();
    test.request.pathname = "/v1/x";
    test.request.fail("no_route", "nothing here", {
      retryAfterSeconds: 1.2,
      headers: { "x-a": "b" },
    });
    test.request.fail("internal_error", "second");
    test.request.finish({ status: 200, errorCode: undefined, cause: undefined });

    const answer = test.answer();
    expect(answer.status).toBe(404);
    expect(answer.headers.get("bearer-proxy-error")).toEqual(["no_route"]);
    expect(answer.headers.get("retry-after")).toEqual(["2"]);
    expect(answer.headers.get("x-a")).toEqual(["b"]);
    expect(answer.headers.get("connection")).toEqual(["keep-alive"]);
    // Not routed: the body names no upstream.
    expect(JSON.parse(answer.body)).toEqual({
      error: { code: "no_route", message: "nothing here" },
    });
    expect(test.record()).toMatchObject({
      upstream: "none",
      routed: false,
      status: 404,
      errorCode: "no_route",
      pathname: "/v1/x",
    });
    expect(test.ctx.finished).toEqual([test.request]);
    expect(span().ends).toEqual([{ status: 404, errorCode: "no_route" }]);
    expect(span().path).toBe("/v1/x");
    expect(test.request.answered).toBe(true);
    expect(test.request.finished).toBe(true);
  });

  it("names its upstream once routed, counted in flight for it", () => {
    const { test, span } = traced();
    test.request.markRouted(makeRoute(makeUpstreamConfig("billing")));
    expect(test.request.upstreamName).toBe("billing");
    expect(test.ctx.inFlight).toEqual(["billing"]);
    expect(span().upstream).toBe("billing");
    test.request.fail("upstream_busy", "busy");
    expect(errorBody(test.answer())).toMatchObject({ upstream: "billing" });
    expect(test.record()).toMatchObject({ upstream: "billing", routed: true });
  });

  it("closes the connection when asked, while draining, or with a body left unread", () => {
    const asked = new TestRequest();
    asked.request.fail("bad_request", "x", { close: true });
    expect(asked.answer().headers.get("connection")).toEqual(["close"]);

    const ctx = new RecordingContext();
    ctx.closing = true;
    const draining = new TestRequest({ ctx });
    draining.request.fail("bad_request", "x");
    expect(draining.answer().headers.get("connection")).toEqual(["close"]);

    const unread = new TestRequest({
      method: "POST",
      rawHeaders: ["Host", "a", "Content-Length", "5"],
    });
    expect(unread.request.carriesBody).toBe(true);
    expect(unread.request.closeConnection()).toBe(true);
    unread.request.fail("payload_too_large", "x");
    expect(unread.answer().headers.get("connection")).toEqual(["close"]);

    const read = new TestRequest({
      method: "POST",
      rawHeaders: ["Host", "a", "Content-Length", "5"],
    });
    read.req.complete = true;
    expect(read.request.closeConnection()).toBe(false);

    const empty = new TestRequest({
      method: "POST",
      rawHeaders: ["Host", "a", "Content-Length", "0"],
    });
    expect(empty.request.carriesBody).toBe(false);
    expect(empty.request.closeConnection()).toBe(false);
  });

  it("always closes an upgrade's connection after an answer (its parser is gone)", () => {
    const test = new TestRequest({ kind: "upgrade" });
    expect(test.request.closeConnection()).toBe(true);
  });

  it("cuts the connection instead of answering once the response started", () => {
    const test = new TestRequest();
    test.res.writeHead(200, { "content-length": "10" });
    test.res.write("part");
    test.request.fail("upstream_reset", "reset", {}, 4);
    expect(test.res.destroyed).toBe(true);
    expect(test.record()).toMatchObject({ status: 200, errorCode: "upstream_reset", bytesOut: 4 });
  });

  it("a hang-up stops a wait and finishes 499 client_closed", () => {
    const { test, span } = traced();
    const wait = new AbortController();
    test.request.abortWait = wait;
    test.request.clientClosed();
    expect(wait.signal.aborted).toBe(true);
    expect(test.record()).toMatchObject({ status: 499, errorCode: "client_closed" });
    expect(span().ends).toEqual([{ status: 499, errorCode: "client_closed" }]);
    expect(test.answers()).toEqual([]);
  });

  it("a hang-up during the exchange is the exchange's to finish", () => {
    const test = new TestRequest();
    let aborts = 0;
    test.request.exchange = { abortFromClient: () => aborts++ };
    test.request.clientClosed();
    expect(aborts).toBe(1);
    expect(test.ctx.records).toEqual([]);
  });

  it("a hang-up after the answer changes nothing", () => {
    const test = new TestRequest();
    test.request.fail("bad_request", "x");
    let aborts = 0;
    test.request.exchange = { abortFromClient: () => aborts++ };
    test.request.clientClosed();
    expect(aborts).toBe(0);
    expect(test.ctx.records).toHaveLength(1);
  });

  it("an upgrade's 101 ends its span at once; its one access line comes when the tunnel closes", () => {
    const { test, span } = traced({ kind: "upgrade" });
    test.request.answeredWith(101);
    expect(span().ends).toEqual([{ status: 101, errorCode: undefined }]);
    expect(test.request.answered).toBe(true);
    expect(test.ctx.records).toEqual([]);
    // The boundary does not answer an upgraded request any more.
    test.request.fail("internal_error", "late");
    expect(test.answers()).toEqual([]);

    test.request.finish({ status: 101, bytesOut: 42, errorCode: undefined, cause: undefined });
    expect(test.record()).toMatchObject({ status: 101, bytesOut: 42 });
    expect(span().ends).toHaveLength(1);
  });

  it("records what the stages learned in its access line", () => {
    const test = new TestRequest({ method: "PUT" });
    const { request } = test;
    request.caller = "user:alice";
    request.waitMs = 12;
    request.attempts = 2;
    request.replayed = true;
    request.bytesIn = () => 77;
    request.finish({ status: 201, bytesOut: 3, errorCode: undefined, cause: undefined });
    expect(test.record()).toMatchObject({
      method: "PUT",
      caller: "user:alice",
      waitMs: 12,
      attempts: 2,
      replayed: true,
      bytesIn: 77,
      bytesOut: 3,
      traceId: "a".repeat(32),
    });
  });
});
