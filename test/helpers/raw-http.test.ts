import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseResponses, rawRequest } from "./raw-http.js";

const ok = (body: string) => `HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
const chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

describe("parseResponses", () => {
  it("keeps a response cut short by default, and leaves it out when completeOnly", () => {
    const text = `${ok("done")}HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf`;
    expect(parseResponses(text).map((r) => r.body)).toEqual(["done", "half"]);
    expect(parseResponses(text, { completeOnly: true }).map((r) => r.body)).toEqual(["done"]);
  });

  it("a chunked body counts as complete only with its last chunk and the blank line", () => {
    expect(parseResponses(`${chunked}3\r\nabc\r\n`, { completeOnly: true })).toEqual([]);
    expect(parseResponses(`${chunked}3\r\nabc\r\n0\r\n`, { completeOnly: true })).toEqual([]);
    expect(parseResponses(`${chunked}3\r\nab`)[0]?.body).toBe("ab");
    const whole = `${chunked}3\r\nabc\r\n0\r\n\r\n`;
    expect(parseResponses(whole, { completeOnly: true })[0]?.body).toBe("abc");
  });

  it("reads the response after a chunked one with trailers", () => {
    const text = `${chunked}2\r\nhi\r\n0\r\nx-sum: 1\r\n\r\n${ok("next")}`;
    expect(parseResponses(text, { completeOnly: true }).map((r) => r.body)).toEqual(["hi", "next"]);
  });

  it("a line that is no chunk size ends the parse instead of looping", () => {
    const text = `${chunked}zz\r\nabc\r\n0\r\n\r\n${ok("after")}`;
    expect(parseResponses(text)).toHaveLength(1);
    expect(parseResponses(text, { completeOnly: true })).toEqual([]);
  });

  it("a body read to the close is never complete", () => {
    const text = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close";
    expect(parseResponses(text)[0]?.body).toBe("until close");
    expect(parseResponses(text, { completeOnly: true })).toEqual([]);
  });
});

describe("rawRequest until", () => {
  let server: Server;
  let port: number;
  beforeAll(async () => {
    // Answers in two writes 200 ms apart and keeps the connection open.
    server = createServer((socket) => {
      socket.once("data", () => {
        socket.write(ok("one"));
        setTimeout(() => socket.write(ok("two")), 200);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("resolves once the condition holds, long before the timeout, on an open connection", async () => {
    const started = performance.now();
    const exchange = await rawRequest(port, "GET / HTTP/1.1\r\n\r\n", {
      timeoutMs: 20_000,
      until: (responses) => responses.length === 2,
    });
    expect(exchange.closed).toBe(false);
    expect(exchange.responses.map((r) => r.body)).toEqual(["one", "two"]);
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it("without it, waits the timeout out on the open connection", async () => {
    const started = performance.now();
    const exchange = await rawRequest(port, "GET / HTTP/1.1\r\n\r\n", { timeoutMs: 600 });
    expect(exchange.closed).toBe(false);
    // Not ≥ 600: the timer counts from libuv's loop time, which can be a little older than `started`.
    expect(performance.now() - started).toBeGreaterThanOrEqual(500);
  });
});
