import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki } from "../helpers/tls.js";
import { startTestProxy, type TestProxy } from "./harness.js";
import { createStubTokens } from "./stub-tokens.js";

/**
 * Request smuggling: whatever bytes a client sends, the upstream receives exactly the requests
 * the proxy accepted, one for one, with the bodies the proxy saw (issue 9).
 */

const H = "Host: 127.0.0.1\r\n";

describe("no smuggling through the proxy", () => {
  let upstream: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startFakeUpstream({ cert: pki.good });
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { u: createStubTokens() },
      config: { upstreams: [{ name: "u", baseUrl: upstream.origin }] },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  async function send(bytes: string) {
    const before = upstream.requests.length;
    const exchange = await rawRequest(proxy.port, bytes, { timeoutMs: 1_500 });
    return {
      statuses: exchange.responses.map((r) => r.status),
      bodies: exchange.responses.map((r) => (r.status === 200 ? JSON.parse(r.body) : r.body)),
      reached: upstream.requests.slice(before).map((r) => `${r.method} ${r.url}`),
    };
  }

  it("pipelined requests with Content-Length bodies arrive one for one", async () => {
    const result = await send(
      `POST /echo/a HTTP/1.1\r\n${H}Content-Length: 5\r\n\r\nhello` +
        `GET /echo/b HTTP/1.1\r\n${H}\r\n` +
        `POST /echo/c HTTP/1.1\r\n${H}Content-Length: 0\r\nConnection: close\r\n\r\n`,
    );
    expect(result.statuses).toEqual([200, 200, 200]);
    expect(result.reached).toEqual(["POST /echo/a", "GET /echo/b", "POST /echo/c"]);
    expect(result.bodies.map((b) => b.bodyLength)).toEqual([5, 0, 0]);
  });

  it("a request hidden in a chunked body stays body bytes", async () => {
    const hidden = `GET /echo/smuggled HTTP/1.1\r\n${H}\r\n`;
    const result = await send(
      `POST /echo/outer HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\n` +
        `${hidden.length.toString(16)}\r\n${hidden}\r\n0\r\n\r\n` +
        `GET /echo/next HTTP/1.1\r\n${H}Connection: close\r\n\r\n`,
    );
    expect(result.reached).toEqual(["POST /echo/outer", "GET /echo/next"]);
    expect(result.bodies[0].bodyLength).toBe(hidden.length);
  });

  it.each([
    [
      "CL.TE",
      `POST /echo/a HTTP/1.1\r\n${H}Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG`,
    ],
    [
      "TE.CL",
      `POST /echo/a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n`,
    ],
    [
      "TE with a space before the colon",
      `POST /echo/a HTTP/1.1\r\n${H}Content-Length: 4\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n`,
    ],
    ["obfuscated TE", `POST /echo/a HTTP/1.1\r\n${H}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n`],
    [
      "TE on a folded line",
      `POST /echo/a HTTP/1.1\r\n${H}X: y\r\n Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc`,
    ],
    [
      "bad chunk size",
      `POST /echo/a HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\n\r\nzz\r\nGET /echo/smuggled HTTP/1.1\r\n${H}\r\n`,
    ],
    [
      "conflicting Content-Lengths",
      `POST /echo/a HTTP/1.1\r\n${H}Content-Length: 0\r\nContent-Length: 40\r\n\r\nGET /echo/smuggled HTTP/1.1\r\n${H}\r\n`,
    ],
  ])("%s: refused, and no smuggled request reaches the upstream", async (_name, bytes) => {
    const result = await send(
      `GET /echo/first HTTP/1.1\r\n${H}\r\n${bytes}GET /echo/smuggled HTTP/1.1\r\n${H}\r\n`,
    );
    // The valid first request is served; the bad one is refused or cut off; nothing after it.
    expect(result.reached[0]).toBe("GET /echo/first");
    expect(result.reached.filter((r) => r.includes("smuggled"))).toEqual([]);
    expect(result.reached.length).toBeLessThanOrEqual(2);
    expect(result.statuses[0]).toBe(200);
    if (result.statuses.length > 1) expect(result.statuses[1]).toBe(400);
  });
});
