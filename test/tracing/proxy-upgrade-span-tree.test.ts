/**
 * Issue #25 for WebSocket upgrades: a `ws` client through the real proxy to a real `ws` server
 * behind TLS gets the tree a plain request gets — SERVER span continuing its `traceparent`,
 * a CLIENT span per handshake attempt, the token wait (and the fetch it caused) — and the
 * upstream's handshake names the CLIENT span. The SERVER span ends at the 101: it is exported
 * while the tunnel is still open, and the tunnel works after that.
 */
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { waitFor } from "../helpers/wait.js";
import { headerValues } from "../protocol/ws-upstream.js";
import {
  attemptSpanAttributes,
  only,
  parseTraceparent,
  serverSpanAttributes,
} from "./tracing-fixture.js";
import { closeWebSocket, echo, openWebSocket, useTracedUpgradeBench } from "./upgrade-fixture.js";

const CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";
const REPLAY_TRACE = "0af7651916cd43dd8448eb211c80319c";

/** Handshakes on /replay get 401 once, then 101 (with whatever new token comes). */
let replayRefused = false;
function authorize(req: IncomingMessage): true | number {
  if (req.url?.startsWith("/replay") && !replayRefused) {
    replayRefused = true;
    return 401;
  }
  return true;
}

describe("WebSocket upgrade traced", () => {
  const bench = useTracedUpgradeBench(authorize);

  const start = async (token: Record<string, unknown> = {}) => {
    bench.proxy = await bench.start({
      upstreams: [{ name: "live", baseUrl: bench.ws.origin, tokenUrl: bench.tokenUrl(), token }],
    });
    return bench.proxy;
  };

  it("continues the client's trace through the handshake; the SERVER span ends at the 101", async () => {
    // A lazy credential: the handshake waits for the token, and the fetch joins its trace.
    const proxy = await start({ prefetch: false });
    const before = bench.ws.handshakes.length;
    const ws = await openWebSocket(`${proxy.url.replace("http", "ws")}/chat/7?room=secret`, {
      traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`,
      tracestate: "vendor=abc",
    });

    // The tunnel is open: what is exported now was ended by the handshake.
    await proxy.tracing.forceFlush();
    const spans = proxy.receiver.spans.filter((s) => s.traceId === CLIENT_TRACE);
    const server = only(spans, "GET", "server");
    expect(server).toMatchObject({
      parentSpanId: CLIENT_SPAN,
      traceState: "vendor=abc",
      status: { code: 0 },
    });
    expect(server.attributes).toEqual(
      serverSpanAttributes({ path: "/chat/7", upstream: "live", status: 101 }),
    );

    const attempt = only(spans, "GET", "client");
    expect(attempt).toMatchObject({ parentSpanId: server.spanId, status: { code: 0 } });
    expect(attempt.attributes).toEqual(
      attemptSpanAttributes({ url: `${bench.ws.origin}/chat/7`, upstream: "live", status: 101 }),
    );

    const wait = only(spans, "token wait", "internal");
    expect(wait).toMatchObject({ parentSpanId: server.spanId, status: { code: 0 } });
    const fetch = only(spans, "token fetch", "client");
    expect(fetch.parentSpanId).toBe(wait.spanId);

    // The upstream's handshake names the attempt, with the trace's state, and nothing else.
    const handshake = bench.ws.handshakes.slice(before);
    expect(handshake).toHaveLength(1);
    const fields = handshake[0]!.headers;
    expect(headerValues(fields, "traceparent")).toHaveLength(1);
    expect(parseTraceparent(headerValues(fields, "traceparent")[0])).toEqual({
      traceId: CLIENT_TRACE,
      spanId: attempt.spanId,
      flags: "01",
    });
    expect(headerValues(fields, "tracestate")).toEqual(["vendor=abc"]);

    // The tunnel outlives the span, and its close adds no span.
    expect(await echo(ws, "after the span")).toBe("after the span");
    const exported = proxy.receiver.spans.length;
    await closeWebSocket(ws);
    await waitFor(() => proxy.accessLines().length === 1, "the upgrade's access line");
    const line = proxy.accessLines()[0]!;
    expect(line).toMatchObject({
      status: 101,
      path: "/chat/7",
      trace_id: CLIENT_TRACE,
      span_id: server.spanId,
    });
    expect(line.bytesIn).toBeGreaterThan(0);
    await proxy.flushed();
    expect(proxy.receiver.spans).toHaveLength(exported);
  });

  it("an upstream 401 on the handshake: the replay is a second attempt after a token wait", async () => {
    const proxy = await start({ minAgeBeforeInvalidate: "0ms", minRefreshInterval: "0ms" });
    // A warm token first, so the only wait is the replay's.
    await closeWebSocket(await openWebSocket(`${proxy.url.replace("http", "ws")}/warm`));
    await proxy.flushed();
    const before = bench.ws.handshakes.length;

    const ws = await openWebSocket(`${proxy.url.replace("http", "ws")}/replay`, {
      traceparent: `00-${REPLAY_TRACE}-b7ad6b7169203331-01`,
    });
    await proxy.tracing.forceFlush();
    const all = proxy.receiver.spans;
    const trace = all.filter((s) => s.traceId === REPLAY_TRACE);
    const server = only(trace, "GET", "server");
    expect(server.status.code).toBe(0);
    expect(server.attributes["http.response.status_code"]).toBe(101);

    const attempts = trace.filter((s) => s.name === "GET" && s.kind === "client");
    expect(attempts).toHaveLength(2);
    const [rejected, replay] = [
      attempts.find((s) => s.attributes["http.request.resend_count"] === undefined)!,
      attempts.find((s) => s.attributes["http.request.resend_count"] === 1)!,
    ];
    for (const span of [rejected, replay]) expect(span.parentSpanId).toBe(server.spanId);
    expect(rejected.status.code).toBe(2);
    expect(rejected.attributes).toMatchObject({
      "http.response.status_code": 401,
      "error.type": "401",
    });
    expect(replay.status.code).toBe(0);
    expect(replay.attributes["http.response.status_code"]).toBe(101);

    // The 401 caused the fetch: it is in this trace, a child of the replay's wait.
    const wait = only(trace, "token wait", "internal");
    expect(wait).toMatchObject({ parentSpanId: server.spanId, status: { code: 0 } });
    expect(wait.links).toHaveLength(0);
    const fetch = only(trace, "token fetch", "client");
    expect(fetch.parentSpanId).toBe(wait.spanId);

    // Each handshake named its own attempt.
    const sent = bench.ws.handshakes
      .slice(before)
      .map((h) => parseTraceparent(headerValues(h.headers, "traceparent")[0]).spanId);
    expect(sent).toEqual([rejected.spanId, replay.spanId]);

    await closeWebSocket(ws);
    await waitFor(() => proxy.accessLines().length === 2, "the replayed upgrade's access line");
    expect(proxy.accessLines()[1]).toMatchObject({
      status: 101,
      replayed: true,
      trace_id: REPLAY_TRACE,
      span_id: server.spanId,
    });
  });

  it("replaces the client's trace fields: an invalid traceparent's tracestate is not sent", async () => {
    const proxy = await start();
    const before = bench.ws.handshakes.length;
    const ws = await openWebSocket(`${proxy.url.replace("http", "ws")}/fields`, {
      traceparent: "00-not-a-trace-01",
      tracestate: "vendor=stale",
    });
    await closeWebSocket(ws);
    const fields = bench.ws.handshakes[before]!.headers;
    const server = only(await proxy.flushed(), "GET", "server");
    // A new trace, started here: the upstream sees ours only.
    expect(server.parentSpanId).toBe("");
    expect(headerValues(fields, "traceparent")).toHaveLength(1);
    expect(parseTraceparent(headerValues(fields, "traceparent")[0]).traceId).toBe(server.traceId);
    expect(headerValues(fields, "tracestate")).toEqual([]);
  });

  it("tracing off: the client's trace fields reach the upstream as sent, no ids logged", async () => {
    bench.proxy = await bench.start({
      off: true,
      upstreams: [{ name: "live", baseUrl: bench.ws.origin, tokenUrl: bench.tokenUrl() }],
    });
    const before = bench.ws.handshakes.length;
    const traceparent = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;
    const ws = await openWebSocket(`${bench.proxy.url.replace("http", "ws")}/untraced`, {
      traceparent,
      tracestate: "vendor=abc",
    });
    const fields = bench.ws.handshakes[before]!.headers;
    expect(headerValues(fields, "traceparent")).toEqual([traceparent]);
    expect(headerValues(fields, "tracestate")).toEqual(["vendor=abc"]);
    await closeWebSocket(ws);
    await waitFor(() => bench.proxy!.accessLines().length === 1, "the upgrade's access line");
    const line = bench.proxy.accessLines()[0]!;
    expect(line.status).toBe(101);
    expect(line).not.toHaveProperty("trace_id");
    expect(line).not.toHaveProperty("span_id");
    expect(await bench.proxy.flushed()).toEqual([]);
  });
});
