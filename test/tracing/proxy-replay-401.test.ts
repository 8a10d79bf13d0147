/**
 * Issue #25 end to end: the 401 replay is an upstream attempt of its own. The emulator revokes
 * the proxy's token, so the first attempt gets 401 and the replay (with a new token) 200: two
 * CLIENT spans under the one SERVER span, the second with `http.request.resend_count` 1, and
 * the upstream's traceparent names the attempt that carried it.
 */
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EchoResponse, Emulator } from "../../src/emulator/index.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { echoedHeader, startTracedProxy, type TracedProxy } from "./proxy-fixture.js";
import { only, parseTraceparent } from "./tracing-fixture.js";

const CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c";

describe("401 replay traced", () => {
  let emulator: Emulator;
  let proxy: TracedProxy;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    proxy = await startTracedProxy({
      caPem: pki.caPem,
      protocol: "http/json",
      upstreams: [
        {
          name: "sheets",
          baseUrl: emulator.url,
          // The revoked token may be dropped at once.
          token: { minAgeBeforeInvalidate: "0ms", minRefreshInterval: "0ms" },
        },
      ],
    });
    const warm = await request(`${proxy.url}/echo/warm`);
    await warm.body.text();
  });
  afterAll(async () => {
    await proxy.close();
    await emulator.close();
  });

  it("records the rejected attempt and the replay as two CLIENT spans", async () => {
    emulator.revokeAllTokens();
    emulator.resetStats();
    const response = await request(`${proxy.url}/echo/after-revoke`, {
      headers: { traceparent: `00-${CLIENT_TRACE}-b7ad6b7169203331-01` },
    });
    expect(response.statusCode).toBe(200);
    const echo = (await response.body.json()) as EchoResponse;
    expect(emulator.stats()).toMatchObject({ apiRequests: 2, unauthorized: 1 });

    const trace = (await proxy.flushed()).filter((s) => s.traceId === CLIENT_TRACE);
    const server = only(trace, "GET", "server");
    expect(server.status.code).toBe(0);
    expect(server.attributes["http.response.status_code"]).toBe(200);

    const attempts = trace.filter((s) => s.kind === "client" && s.name !== "token fetch");
    expect(attempts).toHaveLength(2);
    const rejected = attempts.find((s) => s.attributes["http.request.resend_count"] === undefined)!;
    const replay = attempts.find((s) => s.attributes["http.request.resend_count"] === 1)!;
    for (const attempt of [rejected, replay]) {
      expect(attempt.parentSpanId).toBe(server.spanId);
      expect(attempt.attributes).toMatchObject({
        "http.request.method": "GET",
        "url.full": `${emulator.url}/echo/after-revoke`,
        "bearer_proxy.upstream": "sheets",
      });
    }
    expect(rejected.attributes).toMatchObject({
      "http.response.status_code": 401,
      "error.type": "401",
    });
    expect(rejected.status.code).toBe(2);
    expect(replay.attributes["http.response.status_code"]).toBe(200);
    expect(replay.attributes["error.type"]).toBeUndefined();
    expect(replay.status.code).toBe(0);

    // The echo is the replay's request: its traceparent names the replay, not the first try.
    expect(parseTraceparent(echoedHeader(echo, "traceparent"))).toEqual({
      traceId: CLIENT_TRACE,
      spanId: replay.spanId,
      flags: "01",
    });

    const line = proxy.accessLines().at(-1)!;
    expect(line).toMatchObject({ replayed: true, status: 200, trace_id: CLIENT_TRACE });
    expect(line.span_id).toBe(server.spanId);
  });
});
