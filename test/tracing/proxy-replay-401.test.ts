/**
 * Issue #25 end to end: the 401 replay is an upstream attempt of its own. The emulator revokes
 * the proxy's token, so the first attempt gets 401 and the replay (with a new token) 200: two
 * CLIENT spans under the one SERVER span, the second with `http.request.resend_count` 1, and
 * the upstream's traceparent names the attempt that carried it. The replay's wait for the new
 * token is a `token wait` span between them, failed when no token comes (the 401 then stands).
 */
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EchoResponse, Emulator } from "../../src/emulator/index.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { echoedHeader, startTracedProxy, type TracedProxy } from "./proxy-fixture.js";
import { only, parseTraceparent } from "./tracing-fixture.js";

const CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c";
const FAILED_TRACE = "5bf92f3577b34da6a3ce929d0e0e4736";
const ERROR = 2;

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
          // The revoked token may be dropped at once; a failing endpoint fails the wait soon.
          token: {
            minAgeBeforeInvalidate: "0ms",
            minRefreshInterval: "0ms",
            waitTimeout: "500ms",
            timeout: "500ms",
            initialBackoff: "100ms",
          },
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

    const all = await proxy.flushed();
    const trace = all.filter((s) => s.traceId === CLIENT_TRACE);
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

    // Between the attempts, the wait for a new token. This request's 401 caused the fetch, so
    // the fetch is in its trace, a child of the wait (not a root span linked to it).
    const wait = only(trace, "token wait", "internal");
    expect(wait).toMatchObject({ parentSpanId: server.spanId, status: { code: 0 } });
    expect(wait.attributes).toEqual({ "bearer_proxy.upstream": "sheets" });
    expect(wait.links).toHaveLength(0);
    const fetch = only(trace, "token fetch", "client");
    expect(fetch.parentSpanId).toBe(wait.spanId);
    expect(fetch.status.code).toBe(0);

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

  it("no new token for the replay: the wait fails with the code, the 401 stands", async () => {
    emulator.revokeAllTokens();
    emulator.resetStats();
    emulator.setTokenFault((_req, res) => {
      res.writeHead(500, { "content-type": "application/json" });
      res.end('{"error":"server_error"}');
    });
    try {
      const response = await request(`${proxy.url}/echo/no-new-token`, {
        headers: { traceparent: `00-${FAILED_TRACE}-b7ad6b7169203331-01` },
      });
      expect(response.statusCode).toBe(401);
      await response.body.text();
    } finally {
      emulator.setTokenFault(undefined);
    }
    expect(emulator.stats()).toMatchObject({ apiRequests: 1, unauthorized: 1 });

    const trace = (await proxy.flushed()).filter((s) => s.traceId === FAILED_TRACE);
    const server = only(trace, "GET", "server");
    expect(server.attributes["http.response.status_code"]).toBe(401);
    const attempt = only(trace, "GET", "client");
    expect(attempt.attributes["http.response.status_code"]).toBe(401);
    const wait = only(trace, "token wait", "internal");
    expect(wait.parentSpanId).toBe(server.spanId);
    expect(wait.status.code).toBe(ERROR);
    expect(wait.attributes["error.type"]).toBe("token_unavailable");
    const fetch = only(trace, "token fetch", "client");
    expect(fetch.parentSpanId).toBe(wait.spanId);
    expect(fetch.status.code).toBe(ERROR);
  });
});
