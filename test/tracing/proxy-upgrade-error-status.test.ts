/**
 * Issue #25 for WebSocket upgrades: a handshake the proxy fails with a code ends its SERVER span
 * ERROR with `error.type` = the code, as a plain request does — the upstream unreachable (every
 * attempt too), the token endpoint failing (the token wait too), a caller the upstream's
 * `allow` list refuses (nothing sent upstream). An answer other than 101 from the upstream is
 * relayed: its CLIENT span fails, the SERVER span only on a 5xx.
 */
import type { IncomingMessage } from "node:http";
import { describe, expect, it } from "vitest";
import { closedPort } from "../helpers/fake-upstreams.js";
import {
  ERROR,
  failedAttempts,
  failedServerSpan,
  failedTokenWait,
  only,
} from "./tracing-fixture.js";
import { refusedHandshake, useTracedUpgradeBench } from "./upgrade-fixture.js";

function authorize(req: IncomingMessage): true | number {
  return req.url?.startsWith("/forbidden") ? 403 : true;
}

describe("coded upgrade failures traced as errors", () => {
  const bench = useTracedUpgradeBench(authorize);

  const start = (upstream: Record<string, unknown>) =>
    bench.start({
      upstreams: [
        { name: "live", baseUrl: bench.ws.origin, tokenUrl: bench.tokenUrl(), ...upstream },
      ],
    });

  const wsUrl = (path: string) => `${bench.proxy!.url.replace("http", "ws")}${path}`;

  it("upstream_unreachable: SERVER span and every attempt ERROR with the code", async () => {
    const port = await closedPort();
    bench.proxy = await start({ baseUrl: `https://127.0.0.1:${port}` });
    expect(await refusedHandshake(wsUrl("/gone"))).toBe(502);

    const spans = await bench.proxy.flushed();
    const server = failedServerSpan(spans, "upstream_unreachable", 502, {
      "bearer_proxy.upstream": "live",
      "url.path": "/gone",
    });
    failedAttempts(spans, server, "upstream_unreachable", port);
    expect(bench.proxy.accessLines().at(-1)).toMatchObject({
      status: 502,
      errorCode: "upstream_unreachable",
      trace_id: server.traceId,
      span_id: server.spanId,
    });
  });

  it("token_unavailable: SERVER span and the token wait ERROR, nothing sent upstream", async () => {
    bench.emulator.setTokenFault((_req, res) => {
      res.writeHead(500, { "content-type": "application/json" });
      res.end('{"error":"server_error"}');
    });
    bench.proxy = await start({
      token: { waitTimeout: "500ms", timeout: "500ms", initialBackoff: "100ms" },
    });
    const handshakes = bench.ws.handshakes.length;
    expect(await refusedHandshake(wsUrl("/no-token"))).toBe(503);
    expect(bench.ws.handshakes.length).toBe(handshakes);

    const spans = await bench.proxy.flushed();
    const server = failedServerSpan(spans, "token_unavailable", 503);
    failedTokenWait(spans, server, "token_unavailable");
    expect(spans.filter((s) => s.kind === "client" && s.name === "GET")).toEqual([]);
  });

  it("caller_not_allowed: SERVER span ERROR, no token wait, no attempt", async () => {
    bench.proxy = await start({ allow: [{ cidr: "10.0.0.0/8" }] });
    expect(await refusedHandshake(wsUrl("/denied"))).toBe(403);

    const spans = await bench.proxy.flushed();
    const server = failedServerSpan(spans, "caller_not_allowed", 403, {
      "bearer_proxy.upstream": "live",
    });
    // The prefetch's token fetch is a trace of its own; nothing else but the SERVER span.
    expect(spans.filter((s) => s.traceId === server.traceId)).toEqual([server]);
  });

  it("an upstream 403 is relayed: the CLIENT span fails, the SERVER span does not", async () => {
    bench.proxy = await start({});
    expect(await refusedHandshake(wsUrl("/forbidden"))).toBe(403);

    const spans = await bench.proxy.flushed();
    const server = only(spans, "GET", "server");
    expect(server.status.code).toBe(0);
    expect(server.attributes["error.type"]).toBeUndefined();
    expect(server.attributes["http.response.status_code"]).toBe(403);
    const attempt = only(spans, "GET", "client");
    expect(attempt.parentSpanId).toBe(server.spanId);
    expect(attempt.status.code).toBe(ERROR);
    expect(attempt.attributes).toMatchObject({
      "error.type": "403",
      "http.response.status_code": 403,
      "url.full": `${bench.ws.origin}/forbidden`,
    });
  });
});
