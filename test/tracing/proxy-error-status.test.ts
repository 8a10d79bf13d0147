/**
 * Issue #25 end to end: a request the proxy fails with a code ends its SERVER span with status
 * ERROR and `error.type` = the code — an upstream nobody listens on (`upstream_unreachable`,
 * on every attempt too) and a token endpoint that keeps failing (`token_unavailable`, on the
 * request's token wait too). A 4xx the upstream answers is the client's doing: the SERVER span
 * stays unset while its CLIENT span fails.
 */
import { request } from "undici";
import { describe, expect, it } from "vitest";
import { closedPort } from "../helpers/fake-upstreams.js";
import { useTracedProxyBench } from "./proxy-fixture.js";
import {
  ERROR,
  failedAttempts,
  failedServerSpan,
  failedTokenWait,
  only,
} from "./tracing-fixture.js";

describe("coded failures traced as errors", () => {
  const bench = useTracedProxyBench({
    beforeClose: (emulator) => emulator.setTokenFault(undefined),
  });

  it("upstream_unreachable: SERVER span ERROR with the code, every attempt too", async () => {
    const port = await closedPort();
    bench.proxy = await bench.start({
      upstreams: [
        {
          name: "gone",
          baseUrl: `https://127.0.0.1:${port}`,
          tokenUrl: `${bench.emulator.url}/iam/v1/oauth2/token`,
        },
      ],
    });
    const response = await request(`${bench.proxy.url}/v1/things`);
    expect(response.statusCode).toBe(502);
    await response.body.text();

    const spans = await bench.proxy.flushed();
    const server = failedServerSpan(spans, "upstream_unreachable", 502, {
      "bearer_proxy.upstream": "gone",
    });
    // Every attempt failed the same way, before any answer.
    failedAttempts(spans, server, "upstream_unreachable", port);
    expect(bench.proxy.accessLines().at(-1)).toMatchObject({
      errorCode: "upstream_unreachable",
      trace_id: server.traceId,
      span_id: server.spanId,
    });
  });

  it("token_unavailable: SERVER span and the token wait both ERROR with the code", async () => {
    bench.emulator.setTokenFault((_req, res) => {
      res.writeHead(500, { "content-type": "application/json" });
      res.end('{"error":"server_error"}');
    });
    bench.proxy = await bench.start({
      upstreams: [
        {
          name: "sheets",
          baseUrl: bench.emulator.url,
          token: { waitTimeout: "500ms", timeout: "500ms", initialBackoff: "100ms" },
        },
      ],
    });
    const response = await request(`${bench.proxy.url}/echo/x`);
    await response.body.text();
    expect(response.statusCode).toBe(503);

    const spans = await bench.proxy.flushed();
    const server = failedServerSpan(spans, "token_unavailable", 503);
    failedTokenWait(spans, server, "token_unavailable");
    // No token, no attempt.
    expect(spans.filter((s) => s.kind === "client" && s.name === "GET")).toEqual([]);
  });

  it("an upstream 4xx: the CLIENT span fails, the SERVER span does not", async () => {
    bench.proxy = await bench.start({
      upstreams: [{ name: "sheets", baseUrl: bench.emulator.url }],
    });
    const response = await request(`${bench.proxy.url}/no-such-route`);
    await response.body.text();
    expect(response.statusCode).toBe(404);

    const spans = await bench.proxy.flushed();
    const server = only(spans, "GET", "server");
    expect(server.status.code).toBe(0);
    expect(server.attributes["error.type"]).toBeUndefined();
    expect(server.attributes["http.response.status_code"]).toBe(404);
    const client = only(spans, "GET", "client");
    expect(client.status.code).toBe(ERROR);
    expect(client.attributes).toMatchObject({
      "error.type": "404",
      "http.response.status_code": 404,
    });
  });
});
