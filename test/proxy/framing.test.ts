import { describe, expect, it } from "vitest";
import { rawRequest } from "../helpers/raw-http.js";
import { useStubProxy } from "../helpers/stub-proxy.js";

/**
 * Hostile or broken request framing, byte for byte (RFC 9112, issue 9). Each case: the exact
 * status and error code, the connection closed, and nothing reached the upstream.
 */

const H = "Host: 127.0.0.1\r\n";

const CASES: [string, string, number, string][] = [
  [
    "Content-Length with Transfer-Encoding",
    `POST /echo HTTP/1.1\r\n${H}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    400,
    "bad_request",
  ],
  [
    "two different Content-Lengths",
    `POST /echo HTTP/1.1\r\n${H}Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd`,
    400,
    "bad_request",
  ],
  [
    "two equal Content-Lengths",
    `POST /echo HTTP/1.1\r\n${H}Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc`,
    400,
    "bad_request",
  ],
  [
    "a Content-Length list",
    `POST /echo HTTP/1.1\r\n${H}Content-Length: 3, 3\r\n\r\nabc`,
    400,
    "bad_request",
  ],
  [
    "a signed Content-Length",
    `POST /echo HTTP/1.1\r\n${H}Content-Length: +3\r\n\r\nabc`,
    400,
    "bad_request",
  ],
  ["obs-fold", `GET /echo HTTP/1.1\r\n${H}X-A: b\r\n c\r\n\r\n`, 400, "bad_request"],
  ["bare CR", `GET /echo HTTP/1.1\r\n${H}X-A: b\rc\r\n\r\n`, 400, "bad_request"],
  ["whitespace before a colon", `GET /echo HTTP/1.1\r\n${H}X-A : b\r\n\r\n`, 400, "bad_request"],
  ["NUL in a value", `GET /echo HTTP/1.1\r\n${H}X-A: b\0c\r\n\r\n`, 400, "bad_request"],
  [
    "Transfer-Encoding not ending in chunked",
    `POST /echo HTTP/1.1\r\n${H}Transfer-Encoding: gzip\r\n\r\nabc`,
    400,
    "bad_request",
  ],
  [
    "chunked twice",
    `POST /echo HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
    400,
    "bad_request",
  ],
  [
    "an unknown transfer coding before chunked",
    `POST /echo HTTP/1.1\r\n${H}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
    501,
    "not_implemented",
  ],
  ["a missing Host", "GET /echo HTTP/1.1\r\n\r\n", 400, "bad_request"],
  ["a duplicate Host", `GET /echo HTTP/1.1\r\n${H}Host: other.example\r\n\r\n`, 400, "bad_request"],
  ["an invalid Host", "GET /echo HTTP/1.1\r\nHost: a b/c\r\n\r\n", 400, "bad_request"],
  ["an empty Host", "GET /echo HTTP/1.1\r\nHost: \r\n\r\n", 400, "bad_request"],
  ["userinfo in Host", "GET /echo HTTP/1.1\r\nHost: user@127.0.0.1\r\n\r\n", 400, "bad_request"],
  ["HTTP/0.9", "GET /echo\r\n\r\n", 400, "bad_request"],
  ["HTTP/2.0 on an HTTP/1 listener", `GET /echo HTTP/2.0\r\n${H}\r\n`, 400, "bad_request"],
  ["HTTP/1.2", `GET /echo HTTP/1.2\r\n${H}\r\n`, 400, "bad_request"],
  [
    "101 header fields",
    `GET /echo HTTP/1.1\r\n${H}${Array.from({ length: 100 }, (_, i) => `X-${i}: v\r\n`).join("")}\r\n`,
    431,
    "header_fields_too_large",
  ],
  [
    "a header block over 16 KiB",
    `GET /echo HTTP/1.1\r\n${H}X-Big: ${"a".repeat(17_000)}\r\n\r\n`,
    431,
    "header_fields_too_large",
  ],
  [
    "a 9 KiB request target",
    `GET /echo/${"a".repeat(9_000)} HTTP/1.1\r\n${H}\r\n`,
    414,
    "uri_too_long",
  ],
  ["a fragment in the target", `GET /echo#x HTTP/1.1\r\n${H}\r\n`, 400, "bad_request"],
  ["a relative target", `GET echo HTTP/1.1\r\n${H}\r\n`, 400, "bad_request"],
  ["OPTIONS *", `OPTIONS * HTTP/1.1\r\n${H}\r\n`, 400, "bad_request"],
  ["TRACE", `TRACE /echo HTTP/1.1\r\n${H}\r\n`, 405, "method_not_allowed"],
  [
    "CONNECT",
    "CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\n\r\n",
    405,
    "method_not_allowed",
  ],
  ["an invalid method", `G(T /echo HTTP/1.1\r\n${H}\r\n`, 400, "bad_request"],
];

describe("request framing", () => {
  const world = useStubProxy({
    config: {
      limits: {
        headersTimeout: "1s",
        maxHeaderCount: 100,
        maxHeaderSize: "16KiB",
        maxUrlLength: "8KiB",
      },
    },
  });

  it.each(CASES)(
    "%s → %d %s, connection closed, nothing forwarded",
    async (_name, bytes, status, code) => {
      const before = world.upstream.requests.length;
      const exchange = await rawRequest(world.proxy.port, bytes);
      expect(exchange.responses).toHaveLength(1);
      const response = exchange.responses[0]!;
      expect(response.status).toBe(status);
      expect(response.headers.get("bearer-proxy-error")).toEqual([code]);
      expect(response.headers.get("connection")).toEqual(["close"]);
      expect(JSON.parse(response.body)).toEqual({ error: { code, message: expect.any(String) } });
      expect(exchange.closed).toBe(true);
      expect(world.upstream.requests.length).toBe(before);
    },
  );

  it("a client that never finishes its headers gets 408 and is disconnected", async () => {
    const startedMs = performance.now();
    const exchange = await rawRequest(world.proxy.port, `GET /echo HTTP/1.1\r\n${H}X-Slow: 1\r\n`, {
      timeoutMs: 5_000,
    });
    const elapsedMs = performance.now() - startedMs;
    expect(exchange.responses[0]?.status).toBe(408);
    expect(exchange.responses[0]?.headers.get("bearer-proxy-error")).toEqual(["request_timeout"]);
    expect(exchange.closed).toBe(true);
    // headersTimeout 1 s, checked every second: well under Node's default 30 s check interval.
    expect(elapsedMs).toBeLessThan(3_500);
  });

  it("a Host accepted once does not vouch for the next one on the connection", async () => {
    // The guard remembers the last valid Host (request-guards.ts): only that exact value skips
    // the check.
    const exchange = await rawRequest(
      world.proxy.port,
      `GET /echo HTTP/1.1\r\n${H}\r\n` +
        `GET /echo HTTP/1.1\r\nHost: 127.0.0.1 \r\n\r\n` +
        `GET /echo HTTP/1.1\r\nHost: 127.0.0.1@x\r\n\r\n`,
    );
    expect(exchange.responses.map((r) => r.status)).toEqual([200, 200, 400]);
    expect(exchange.closed).toBe(true);
  });

  it("a valid request on the same listener still works (control)", async () => {
    const exchange = await rawRequest(
      world.proxy.port,
      `GET /echo HTTP/1.1\r\n${H}Connection: close\r\n\r\n`,
    );
    expect(exchange.responses[0]!.status).toBe(200);
    expect(world.upstream.requests.at(-1)?.url).toBe("/echo");
  });
});
