/**
 * Issue #25, on the wire: the upstream receives a traceparent with the request's trace id and
 * the CLIENT span of its attempt as parent, and that span reaches the collector as a child of
 * the request's SERVER span.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { writeTraceContext } from "../../src/observability/tracing.js";
import {
  only,
  parseTraceparent,
  startTracingFixture,
  type TracingFixture,
} from "./tracing-fixture.js";

describe("traceparent sent upstream", () => {
  let fx: TracingFixture;
  let upstream: Server;
  let origin: string;
  const received: IncomingHttpHeaders[] = [];

  beforeEach(async () => {
    fx = await startTracingFixture("http/json");
    received.length = 0;
    upstream = createServer((req, res) => {
      received.push(req.headers);
      res.end("ok");
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    await fx.close();
    upstream.closeAllConnections();
    await new Promise((resolve) => upstream.close(resolve));
  });

  it("names the attempt's span as parent, in the client's trace", async () => {
    const clientParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const server = fx.tracing.startServerSpan({
      headers: { traceparent: clientParent },
      method: "GET",
      httpVersion: "1.1",
    });
    const attempt = server.startClientSpan("GET", origin, "/orders?id=1", "orders");
    const headers = ["accept", "text/plain"];
    writeTraceContext(headers, attempt);
    const res = await request(`${origin}/orders?id=1`, { headers });
    await res.body.text();
    attempt.end(res.statusCode, undefined, "1.1");
    server.end(res.statusCode);

    const spans = await fx.flushed();
    const clientSpan = only(spans, "GET", "client");
    expect(parseTraceparent(received[0]?.traceparent as string)).toEqual({
      traceId: "0af7651916cd43dd8448eb211c80319c",
      spanId: clientSpan.spanId,
      flags: "01",
    });
    expect(clientSpan.parentSpanId).toBe(only(spans, "GET", "server").spanId);
    expect(clientSpan.attributes["url.full"]).toBe(`${origin}/orders`);
  });
});
