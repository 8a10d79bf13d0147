import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawRequest } from "../helpers/raw-http.js";
import { type ProxiedRawUpstream, startProxiedRawUpstream } from "./support/proxy-to.js";

/**
 * Issue 15 items 6 and 7, response side, over raw sockets both ends: upstream trailers reach a
 * client that gets a chunked response (HTTP/1.1), and where the client's response can't be
 * chunked (HTTP/1.0, a length, HEAD) the `Trailer` field goes too — never a 502. A 103 Early
 * Hints is relayed to HTTP/1.1 clients before the final response, never to HTTP/1.0 ones.
 * (Request trailers: request-framing.test.ts.)
 */

const CHUNKED_WITH_TRAILERS =
  "HTTP/1.1 200 OK\r\ncontent-type: application/grpc-web\r\ntrailer: x-checksum, grpc-status\r\n" +
  "transfer-encoding: chunked\r\n\r\n" +
  "5\r\nhello\r\n0\r\nx-checksum: sha256=abc\r\ngrpc-status: 0\r\n\r\n";

const LENGTH_WITH_TRAILER =
  "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntrailer: x-checksum\r\ncontent-length: 5\r\n\r\nhello";

const EARLY_HINTS =
  "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload; as=style\r\nlink: </app.js>; rel=preload; as=script\r\n\r\n";

describe("trailers and early hints", () => {
  let setup: ProxiedRawUpstream;

  beforeAll(async () => {
    setup = await startProxiedRawUpstream(async ({ head, socket, readBody }) => {
      await readBody();
      const path = head.split(" ")[1]!;
      if (path === "/trailers") socket.write(CHUNKED_WITH_TRAILERS);
      else if (path === "/length-and-trailer") socket.write(LENGTH_WITH_TRAILER);
      else if (path === "/early-hints") {
        socket.write(EARLY_HINTS);
        await new Promise((resolve) => setTimeout(resolve, 300));
        socket.write("HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nmain");
      } else socket.write("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
    });
  });
  afterAll(async () => {
    await setup.close();
  });

  const get = (path: string, version = "1.1", method = "GET") =>
    rawRequest(
      setup.proxy.port,
      `${method} ${path} HTTP/${version}\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
      { timeoutMs: 5_000 },
    );

  it("upstream trailers reach an HTTP/1.1 client after the last chunk", async () => {
    const { text, responses } = await get("/trailers");
    expect(responses[0]!.status).toBe(200);
    expect(responses[0]!.headers.get("trailer")).toEqual(["x-checksum, grpc-status"]);
    expect(responses[0]!.headers.get("transfer-encoding")).toEqual(["chunked"]);
    expect(responses[0]!.body).toBe("hello");
    expect(text).toMatch(/\r\n0\r\nx-checksum: sha256=abc\r\ngrpc-status: 0\r\n\r\n$/);
  });

  it("an HTTP/1.0 client (no chunking) gets the body without the Trailer field", async () => {
    const { text, responses } = await get("/trailers", "1.0");
    expect(responses[0]!.status).toBe(200);
    expect(responses[0]!.headers.has("trailer")).toBe(false);
    expect(responses[0]!.body).toBe("hello");
    expect(text).not.toContain("x-checksum: sha256");
  });

  it("HEAD drops the Trailer field instead of failing", async () => {
    const { responses } = await get("/trailers", "1.1", "HEAD");
    expect(responses[0]!.status).toBe(200);
    expect(responses[0]!.headers.has("trailer")).toBe(false);
  });

  it("a response with a length and a Trailer field is relayed without the field, not a 502", async () => {
    const { responses } = await get("/length-and-trailer");
    expect(responses[0]!.status).toBe(200);
    expect(responses[0]!.headers.has("trailer")).toBe(false);
    expect(responses[0]!.body).toBe("hello");
  });

  it("103 Early Hints reaches an HTTP/1.1 client before the final response", async () => {
    const { responses } = await get("/early-hints");
    expect(responses.map((r) => r.status)).toEqual([103, 200]);
    expect(responses[0]!.headers.get("link")).toEqual([
      "</style.css>; rel=preload; as=style, </app.js>; rel=preload; as=script",
    ]);
    expect(responses[1]!.body).toBe("main");
  });

  it("an HTTP/1.0 client never gets a 1xx", async () => {
    const { responses } = await get("/early-hints", "1.0");
    expect(responses.map((r) => r.status)).toEqual([200]);
    expect(responses[0]!.body).toBe("main");
  });
});
