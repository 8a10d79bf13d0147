/**
 * Issue #25: no Authorization or Proxy-Authorization value, token, client secret, assertion or
 * query string in any span attribute, event, link or resource, nor in the tracing logs.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startTracingFixture, type TracingFixture } from "./tracing-fixture.js";

const PLANTED = "pl4nted-s3cret-7c1d";

function serialize(value: unknown): string {
  return JSON.stringify(value, (_key, v) =>
    typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString() : v,
  );
}

describe("no secrets in spans", () => {
  let fx: TracingFixture;
  beforeEach(async () => {
    fx = await startTracingFixture("http/protobuf", {
      // The collector's own credential goes to the collector, nowhere else.
      OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${PLANTED}`,
    });
  });
  afterEach(async () => {
    await fx.close();
  });

  it("records none of the planted values", async () => {
    const { tracing } = fx;
    const server = tracing.startServerSpan({
      headers: {
        authorization: `Bearer ${PLANTED}`,
        "proxy-authorization": `Basic ${PLANTED}`,
        cookie: `session=${PLANTED}`,
        tracestate: "vendor=ok",
      },
      method: "POST",
      httpVersion: "1.1",
    });
    server.setUpstream("orders");
    server.setPath("/v1/orders");
    const wait = server.startTokenSpan("orders");
    const fetch = tracing.startTokenFetchSpan("orders", {
      parent: wait,
      tokenUrl: `https://client:${PLANTED}@idp.example/token?client_secret=${PLANTED}&client_assertion=${PLANTED}`,
    });
    fetch.end("token_rejected");
    wait.end("token_unavailable");
    const attempt = server.startClientSpan(
      "POST",
      "https://api.example",
      `/v1/orders?access_token=${PLANTED}&sig=${PLANTED}`,
      "orders",
    );
    attempt.end(401);
    server.end(401);

    const spans = await fx.flushed();
    expect(spans).toHaveLength(4);
    expect(serialize(spans)).not.toContain(PLANTED);
    expect(fx.lines.join("")).not.toContain(PLANTED);
    expect(fx.receiver.exports[0]?.headers.authorization).toBe(`Bearer ${PLANTED}`);
    const fetchSpan = spans.find((s) => s.name === "token fetch")!;
    expect(fetchSpan.attributes["url.full"]).toBe("https://idp.example/token");
  });
});
