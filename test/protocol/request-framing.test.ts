import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki } from "../helpers/tls.js";
import { startTestProxy, type TestProxy } from "../proxy/harness.js";
import { createStubTokens } from "../proxy/stub-tokens.js";
import {
  parseHeadFields,
  type RawTlsUpstream,
  startRawTlsUpstream,
} from "./support/raw-tls-upstream.js";

/**
 * Issue 15 item 1: the framing the upstream sees, read off the wire, for every body plan.
 * A request with a valid Content-Length reaches the upstream with that exact Content-Length and
 * no Transfer-Encoding — buffered (≤ replayBodyLimit) or streamed (above it), and on the 401
 * replay; a chunked request stays chunked.
 */

interface Seen {
  headers: Map<string, string[]>;
  framing: string;
  length: number;
  sha256: string;
  trailers: string[];
}

const MIB = 1024 * 1024;
const H = "Host: 127.0.0.1\r\n";

describe("request framing as the upstream sees it", () => {
  let upstream: RawTlsUpstream;
  let proxy: TestProxy;
  const seen: Seen[] = [];

  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startRawTlsUpstream({
      cert: pki.good,
      onRequest: async ({ head, socket, readBody }) => {
        const headers = parseHeadFields(head);
        const body = await readBody();
        seen.push({
          headers,
          framing: body.framing,
          length: body.body.length,
          sha256: createHash("sha256").update(body.body).digest("hex"),
          trailers: body.trailers,
        });
        // /replay: the first token is refused, so the proxy replays with a fresh one.
        const refuse =
          head.startsWith("POST /replay") && headers.get("authorization")?.[0]?.endsWith("-1");
        socket.write(
          refuse
            ? "HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer\r\ncontent-length: 0\r\n\r\n"
            : "HTTP/1.1 204 No Content\r\n\r\n",
        );
      },
    });
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { u: createStubTokens() },
      logLevel: "warn",
      config: { upstreams: [{ name: "u", baseUrl: upstream.origin }] },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  /** Sends head and body; `parts` instead sends them in pieces, 300 ms apart (a streaming client). */
  async function send(head: string, body: Buffer | string = "", parts?: string[]) {
    seen.length = 0;
    const exchange = await rawRequest(
      proxy.port,
      Buffer.concat([Buffer.from(head), Buffer.from(body)]),
      { timeoutMs: 10_000, ...(parts ? { parts: [head, ...parts], pauseMs: 300 } : {}) },
    );
    expect(exchange.responses.at(-1)?.status).toBe(204);
    return seen;
  }

  const sha = (data: Buffer) => createHash("sha256").update(data).digest("hex");

  it("no body: neither Content-Length nor Transfer-Encoding", async () => {
    const [request] = await send(`GET /none HTTP/1.1\r\n${H}Connection: close\r\n\r\n`);
    expect(request!.headers.has("content-length")).toBe(false);
    expect(request!.headers.has("transfer-encoding")).toBe(false);
  });

  it("an empty body: Content-Length: 0", async () => {
    const [request] = await send(
      `POST /empty HTTP/1.1\r\n${H}Content-Length: 0\r\nConnection: close\r\n\r\n`,
    );
    expect(request!.headers.get("content-length")).toEqual(["0"]);
    expect(request!.headers.has("transfer-encoding")).toBe(false);
  });

  it("a small body (buffered): its exact Content-Length", async () => {
    const body = Buffer.alloc(1000, "a");
    const [request] = await send(
      `POST /small HTTP/1.1\r\n${H}Content-Length: 1000\r\nConnection: close\r\n\r\n`,
      body,
    );
    expect(request!.headers.get("content-length")).toEqual(["1000"]);
    expect(request!.headers.has("transfer-encoding")).toBe(false);
    expect(request!.sha256).toBe(sha(body));
  });

  it("a large body (streamed, over replayBodyLimit): its exact Content-Length, not chunked", async () => {
    const body = Buffer.alloc(3 * MIB, "b");
    const [request] = await send(
      `PUT /large HTTP/1.1\r\n${H}Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
      body,
    );
    expect(request!.headers.get("content-length")).toEqual([String(body.length)]);
    expect(request!.headers.has("transfer-encoding")).toBe(false);
    expect(request!.framing).toBe("content-length");
    expect(request!.sha256).toBe(sha(body));
  });

  it("a chunked body stays chunked, without a Content-Length", async () => {
    // Streamed by the client: the proxy forwards before the end is known. (A chunked body that
    // arrived whole before forwarding is framed by undici with its now-known length: the same
    // message, RFC 9112 §6.)
    const [request] = await send(
      `POST /chunked HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n`,
      "",
      ["5\r\nhello\r\n", "6\r\n world\r\n0\r\n\r\n"],
    );
    expect(request!.headers.get("transfer-encoding")).toEqual(["chunked"]);
    expect(request!.headers.has("content-length")).toBe(false);
    expect(request!.framing).toBe("chunked");
    expect(request!.length).toBe(11);
  });

  it("request trailers: undici can't send them, so the Trailer field is dropped too (item 6)", async () => {
    const [request] = await send(
      `POST /trailers HTTP/1.1\r\n${H}Transfer-Encoding: chunked\r\nTrailer: x-checksum\r\nConnection: close\r\n\r\n`,
      "",
      ["5\r\nhello\r\n", "0\r\nx-checksum: abc\r\n\r\n"],
    );
    expect(request!.framing).toBe("chunked");
    expect(request!.length).toBe(5);
    expect(request!.headers.has("trailer")).toBe(false);
    expect(request!.trailers).toEqual([]);
  });

  it("the 401 replay sends the same Content-Length twice", async () => {
    const body = Buffer.alloc(2000, "c");
    const requests = await send(
      `POST /replay HTTP/1.1\r\n${H}Content-Length: 2000\r\nConnection: close\r\n\r\n`,
      body,
    );
    expect(requests).toHaveLength(2);
    for (const request of requests) {
      expect(request.headers.get("content-length")).toEqual(["2000"]);
      expect(request.headers.has("transfer-encoding")).toBe(false);
      expect(request.sha256).toBe(sha(body));
    }
  });
});
