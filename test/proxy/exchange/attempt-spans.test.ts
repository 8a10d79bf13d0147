/**
 * Each attempt's span (src/proxy/exchange/attempt-spans.ts): each attempt starts a CLIENT span,
 * child of the request's SERVER span, named with method, origin, path, upstream and resend
 * count, and its `traceparent` is written into the forwarded headers in place of the last
 * attempt's; the span ends once, with the status the exchange saw for that attempt (1xx are not
 * the answer; a 101 is), the error code, and the protocol version (`1.1`, or left to the caller
 * over HTTP/2). It is not a layer: the response reaches the relay untouched.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { AttemptSpanRecorder } from "../../../src/proxy/exchange/attempt-spans.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { exchangeRig, makeRoute, RecordingServerSpan } from "../support/pipeline-fakes.js";

const http1 = makeUpstreamConfig("api", { baseUrl: "https://api.example.test" });
const http2 = makeUpstreamConfig("h2", { baseUrl: "https://h2.example.test", http2: true });

function recorder(config = http1) {
  const server = new RecordingServerSpan();
  const spans = new AttemptSpanRecorder(server, makeRoute(config), "GET", "/v1/items?secret=1");
  return { server, spans };
}

/** A real exchange over a scripted dispatcher, with the recorder as its `span` role. */
function tracedExchange(options: Parameters<typeof exchangeRig>[1] = {}) {
  const rig = exchangeRig(http1, { dropTraceContext: true, ...options });
  const server = new RecordingServerSpan();
  const spans = new AttemptSpanRecorder(server, rig.route, "GET", "/");
  rig.start({ span: spans });
  return { rig, server };
}

function traceparentOf(headers: string[]): string | undefined {
  const i = headers.indexOf("traceparent");
  return i < 0 ? undefined : headers[i + 1];
}

describe("AttemptSpanRecorder", () => {
  it("starts a client span per attempt and writes its traceparent, replacing the last one", () => {
    const { server, spans } = recorder();
    const headers = ["accept", "*/*", "traceparent", "00-client-value-01"];
    spans.beginAttempt(headers, 0);
    expect(server.clients).toHaveLength(1);
    expect(server.clients[0]).toMatchObject({
      method: "GET",
      origin: "https://api.example.test",
      path: "/v1/items?secret=1",
      upstream: "api",
      resendCount: 0,
    });
    expect(traceparentOf(headers)).toBe(server.clients[0]!.traceparent());

    spans.endAttempt(0, undefined);
    spans.beginAttempt(headers, 1);
    expect(server.clients[1]!.resendCount).toBe(1);
    expect(traceparentOf(headers)).toBe(server.clients[1]!.traceparent());
    // Replaced in place: still one field, the other fields where they were.
    expect(headers.filter((h) => h === "traceparent")).toHaveLength(1);
    expect(headers.slice(0, 2)).toEqual(["accept", "*/*"]);
  });

  it("ends the attempt once, with the status, the error code and HTTP/1.1", () => {
    const { server, spans } = recorder();
    spans.beginAttempt([], 0);
    spans.endAttempt(503, "upstream_busy");
    spans.endAttempt(200, "again");
    expect(server.clients[0]!.ends).toEqual([
      { status: 503, errorCode: "upstream_busy", protocolVersion: "1.1" },
    ]);
  });

  it("leaves the protocol version to the caller over HTTP/2, and takes the one it is given", () => {
    const h2 = recorder(http2);
    h2.spans.beginAttempt([], 0);
    h2.spans.endAttempt(200, undefined);
    expect(h2.server.clients[0]!.ends[0]!.protocolVersion).toBeUndefined();

    const given = recorder();
    given.spans.beginAttempt([], 0);
    given.spans.endAttempt(200, undefined, "1.1");
    expect(given.server.clients[0]!.ends[0]!.protocolVersion).toBe("1.1");
  });

  it("does nothing on endAttempt with no attempt begun", () => {
    const { server, spans } = recorder();
    expect(() => spans.endAttempt(200, undefined)).not.toThrow();
    expect(server.clients).toEqual([]);
  });
});

describe("an exchange's attempt spans", () => {
  it("each dispatched attempt carries its own span's traceparent, and ends with its own answer", () => {
    const { rig, server } = tracedExchange();
    rig.dispatcher.last.connect();
    rig.dispatcher.last.head(502);
    rig.exchange.endAttempt("upstream_reset");
    rig.exchange.resendNow(true);
    rig.fresh.last.respond(200);

    expect(rig.dispatcher.last.header("traceparent")).toBe(server.clients[0]!.traceparent());
    expect(rig.fresh.last.header("traceparent")).toBe(server.clients[1]!.traceparent());
    expect(server.clients.map((c) => c.ends)).toEqual([
      [{ status: 502, errorCode: "upstream_reset", protocolVersion: "1.1" }],
      [{ status: 200, errorCode: undefined, protocolVersion: "1.1" }],
    ]);
  });

  it("starts each attempt from no answer: a resend that gets none ends with status 0", () => {
    const { rig, server } = tracedExchange();
    rig.dispatcher.last.connect();
    rig.dispatcher.last.head(503);
    rig.exchange.endAttempt(undefined);
    rig.exchange.resendNow(false);
    rig.dispatcher.last.fail(new Error("reset"));
    expect(server.clients.map((c) => c.ends[0]?.status)).toEqual([503, 0]);
  });

  it("does not take an interim (1xx) head for the attempt's answer", () => {
    const { rig, server } = tracedExchange();
    rig.dispatcher.last.connect();
    rig.dispatcher.last.head(103, {}, "Early Hints");
    rig.exchange.endAttempt("upstream_reset");
    expect(server.clients[0]!.ends[0]).toMatchObject({ status: 0, errorCode: "upstream_reset" });

    const answered = tracedExchange();
    answered.rig.dispatcher.last.connect();
    answered.rig.dispatcher.last.head(100);
    answered.rig.dispatcher.last.head(201);
    answered.rig.dispatcher.last.complete();
    expect(answered.server.clients[0]!.ends).toEqual([
      { status: 201, errorCode: undefined, protocolVersion: "1.1" },
    ]);
  });

  it("records a 101 as the attempt's answer", () => {
    const { rig, server } = tracedExchange({ upgrade: "websocket" });
    const attempt = rig.upgradeDispatcher.last;
    attempt.connect();
    attempt.handler.onUpgrade!(101, [], new PassThrough());
    rig.exchange.handOff();
    expect(server.clients[0]!.ends[0]).toMatchObject({ status: 101, protocolVersion: "1.1" });
    expect(rig.sink.types()).toEqual(["upgrade"]);
  });

  it("passes the response to the relay unchanged, backpressure included", () => {
    const { rig } = tracedExchange();
    rig.sink.accept = false;
    const attempt = rig.dispatcher.last;
    attempt.connect();
    expect(attempt.head(200, { a: "b" }, "OK")).toBe(false);
    expect(attempt.data("body")).toBe(false);
    attempt.complete();
    expect(rig.sink.events).toEqual([
      { type: "headers", status: 200, headers: { a: "b" }, statusText: "OK" },
      { type: "data", text: "body" },
      { type: "complete", trailers: null },
    ]);
  });
});
