/**
 * Issue #25: a coded failure sets span status ERROR and records the code as `error.type`
 * (semconv); a client span fails on any 4xx/5xx, a server span on 5xx only.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { only, startTracingFixture, type TracingFixture } from "./tracing-fixture.js";

const ERROR = 2;
const UNSET = 0;

describe("error status", () => {
  let fx: TracingFixture;
  beforeEach(async () => {
    fx = await startTracingFixture("http/protobuf");
  });
  afterEach(async () => {
    await fx.close();
  });

  it("marks an unreachable upstream on the attempt and the request", async () => {
    const server = fx.tracing.startServerSpan({ headers: {}, method: "GET" });
    server.setUpstream("orders");
    server
      .startClientSpan("GET", "https://api.example", "/", "orders")
      .end(0, "upstream_unreachable");
    server.end(502, "upstream_unreachable");
    const spans = await fx.flushed();
    for (const kind of ["server", "client"]) {
      const span = only(spans, "GET", kind);
      expect(span.status.code).toBe(ERROR);
      expect(span.attributes["error.type"]).toBe("upstream_unreachable");
    }
    expect(only(spans, "GET", "client").attributes["http.response.status_code"]).toBeUndefined();
    expect(only(spans, "GET", "server").attributes["http.response.status_code"]).toBe(502);
  });

  it("marks a token that never came on the wait and the request", async () => {
    const server = fx.tracing.startServerSpan({ headers: {}, method: "GET" });
    const wait = server.startTokenSpan("orders");
    wait.end("token_unavailable");
    server.end(503, "token_unavailable");
    const spans = await fx.flushed();
    for (const span of [only(spans, "token wait"), only(spans, "GET", "server")]) {
      expect(span.status.code).toBe(ERROR);
      expect(span.attributes["error.type"]).toBe("token_unavailable");
    }
  });

  it("fails a client span on an upstream 5xx, not the server span on a passed-through 404", async () => {
    const server = fx.tracing.startServerSpan({ headers: {}, method: "GET" });
    server.startClientSpan("GET", "https://api.example", "/a", "orders").end(503);
    server.startClientSpan("GET", "https://api.example", "/b", "orders", 1).end(404);
    server.end(404);
    const spans = await fx.flushed();
    const clients = spans.filter((s) => s.kind === "client");
    expect(clients.map((s) => [s.attributes["error.type"], s.status.code])).toEqual([
      ["503", ERROR],
      ["404", ERROR],
    ]);
    const serverSpan = only(spans, "GET", "server");
    expect(serverSpan.status.code).toBe(UNSET);
    expect(serverSpan.attributes["error.type"]).toBeUndefined();
  });

  it("fails a server span on a 5xx without a code", async () => {
    const server = fx.tracing.startServerSpan({ headers: {}, method: "GET" });
    server.end(500);
    const spans = await fx.flushed();
    expect(only(spans, "GET", "server")).toMatchObject({
      status: { code: ERROR },
      attributes: { "error.type": "500" },
    });
  });
});
