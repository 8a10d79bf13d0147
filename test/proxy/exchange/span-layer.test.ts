/**
 * The span layer (src/proxy/exchange/span-layer.ts): each attempt starts a CLIENT span, child
 * of the request's SERVER span, named with method, origin, path, upstream and resend count, and
 * its `traceparent` is written into the forwarded headers in place of the last attempt's; the
 * span ends once, with the status the upstream answered (1xx are not the answer; a 101 is),
 * the error code, and the protocol version (`1.1`, or left to the caller over HTTP/2); the
 * response callbacks pass through unchanged.
 */
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { SpanLayer } from "../../../src/proxy/exchange/span-layer.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import {
  exchangeRig,
  makeRoute,
  RecordingServerSpan,
  RecordingSink,
} from "../support/pipeline-fakes.js";

const http1 = makeUpstreamConfig("api", { baseUrl: "https://api.example.test" });
const http2 = makeUpstreamConfig("h2", { baseUrl: "https://h2.example.test", http2: true });

function layer(config = http1) {
  const server = new RecordingServerSpan();
  const sink = new RecordingSink();
  const span = new SpanLayer(sink, server, makeRoute(config), "GET", "/v1/items?secret=1");
  return { server, sink, span };
}

function traceparentOf(headers: string[]): string | undefined {
  const i = headers.indexOf("traceparent");
  return i < 0 ? undefined : headers[i + 1];
}

describe("SpanLayer", () => {
  it("starts a client span per attempt and writes its traceparent, replacing the last one", () => {
    const { server, span } = layer();
    const headers = ["accept", "*/*", "traceparent", "00-client-value-01"];
    span.beginAttempt(headers, 0);
    expect(server.clients).toHaveLength(1);
    expect(server.clients[0]).toMatchObject({
      method: "GET",
      origin: "https://api.example.test",
      path: "/v1/items?secret=1",
      upstream: "api",
      resendCount: 0,
    });
    expect(traceparentOf(headers)).toBe(server.clients[0]!.traceparent());

    span.endAttempt(undefined);
    span.beginAttempt(headers, 1);
    expect(server.clients[1]!.resendCount).toBe(1);
    expect(traceparentOf(headers)).toBe(server.clients[1]!.traceparent());
    // Replaced in place: still one field, the other fields where they were.
    expect(headers.filter((h) => h === "traceparent")).toHaveLength(1);
    expect(headers.slice(0, 2)).toEqual(["accept", "*/*"]);
  });

  it("ends the attempt once, with the final status, the error code and HTTP/1.1", () => {
    const { server, span } = layer();
    span.beginAttempt([], 0);
    span.onHeaders(100, [], () => {}, "");
    span.onHeaders(503, [], () => {}, "");
    span.endAttempt("upstream_busy");
    span.endAttempt("again");
    expect(server.clients[0]!.ends).toEqual([
      { status: 503, errorCode: "upstream_busy", protocolVersion: "1.1" },
    ]);
  });

  it("does not take an interim (1xx) head for the attempt's answer", () => {
    const { server, span } = layer();
    span.beginAttempt([], 0);
    span.onHeaders(103, [], () => {}, "Early Hints");
    span.endAttempt("upstream_reset");
    expect(server.clients[0]!.ends[0]).toMatchObject({ status: 0, errorCode: "upstream_reset" });
  });

  it("ends an attempt that got no answer with status 0, and starts the next one from 0", () => {
    const { server, span } = layer();
    span.beginAttempt([], 0);
    span.onHeaders(502, [], () => {}, "");
    span.endAttempt(undefined);
    span.beginAttempt([], 1);
    span.endAttempt("upstream_reset");
    expect(server.clients.map((c) => c.ends[0]?.status)).toEqual([502, 0]);
  });

  it("leaves the protocol version to the caller over HTTP/2, and takes the one it is given", () => {
    const h2 = layer(http2);
    h2.span.beginAttempt([], 0);
    h2.span.endAttempt(undefined);
    expect(h2.server.clients[0]!.ends[0]!.protocolVersion).toBeUndefined();

    const given = layer();
    given.span.beginAttempt([], 0);
    given.span.endAttempt(undefined, "1.1");
    expect(given.server.clients[0]!.ends[0]!.protocolVersion).toBe("1.1");
  });

  it("records a 101 as the attempt's answer", () => {
    const { server, span, sink } = layer();
    span.beginAttempt([], 0);
    const socket = new PassThrough();
    span.onUpgrade(101, [], socket);
    span.endAttempt(undefined, "1.1");
    expect(server.clients[0]!.ends[0]).toMatchObject({ status: 101 });
    expect(sink.types()).toEqual(["upgrade"]);
  });

  it("does nothing on endAttempt with no attempt begun", () => {
    const { server, span } = layer();
    expect(() => span.endAttempt(undefined)).not.toThrow();
    expect(server.clients).toEqual([]);
  });

  it("passes the response through unchanged, backpressure included", () => {
    const { span, sink } = layer();
    span.beginAttempt([], 0);
    sink.accept = false;
    expect(span.onHeaders(200, [Buffer.from("a"), Buffer.from("b")], () => {}, "OK")).toBe(false);
    expect(span.onData(Buffer.from("body"))).toBe(false);
    span.onComplete(null);
    expect(sink.events).toEqual([
      { type: "headers", status: 200, headers: { a: "b" }, statusText: "OK" },
      { type: "data", text: "body" },
      { type: "complete", trailers: null },
    ]);
  });

  it("in an exchange: each dispatched attempt carries its own span's traceparent", () => {
    const rig = exchangeRig(http1, { dropTraceContext: true });
    const server = new RecordingServerSpan();
    const span = new SpanLayer(rig.sink, server, rig.route, "GET", "/");
    rig.start({ head: span, span });
    rig.exchange.endAttempt("upstream_reset");
    rig.exchange.resendNow(true);
    rig.fresh.last.respond(200);

    expect(rig.dispatcher.last.header("traceparent")).toBe(server.clients[0]!.traceparent());
    expect(rig.fresh.last.header("traceparent")).toBe(server.clients[1]!.traceparent());
    expect(server.clients.map((c) => c.ends)).toEqual([
      [{ status: 0, errorCode: "upstream_reset", protocolVersion: "1.1" }],
      [{ status: 200, errorCode: undefined, protocolVersion: "1.1" }],
    ]);
  });
});
