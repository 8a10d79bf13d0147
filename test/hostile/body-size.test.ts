/**
 * Issue 14 item 3: `limits.maxRequestBodySize` (per-upstream `maxRequestBodySize` overrides it).
 * A declared Content-Length over it is refused with 413 before a byte is read or forwarded; a
 * chunked body that crosses it gets 413 while nothing was answered, and the upstream request
 * is aborted.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawRequest } from "../helpers/raw-http.js";
import { type HostileWorld, startHostileWorld, stillAlive } from "./support/hostile-world.js";

let world: HostileWorld;
beforeAll(async () => {
  world = await startHostileWorld({
    limits: { maxRequestBodySize: "64KiB" },
    upstream: { maxRequestBodySize: "8KiB" },
  });
}, 60_000);
afterAll(() => world?.close());

describe("request body size limit", () => {
  it("a huge declared Content-Length: 413 at once, nothing forwarded", async () => {
    const seen = world.upstream.requests.length;
    const answer = await rawRequest(
      world.port,
      "POST /echo/huge HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1099511627776\r\n\r\nabc",
      { timeoutMs: 3_000 },
    );
    const res = answer.responses[0]!;
    expect(res.status).toBe(413);
    expect(res.headers.get("bearer-proxy-error")).toEqual(["payload_too_large"]);
    expect(JSON.parse(res.body).error.code).toBe("payload_too_large");
    expect(answer.closed).toBe(true);
    expect(world.upstream.requests.length).toBe(seen);
  });

  it("the upstream's own limit (8 KiB) wins over limits.maxRequestBodySize (64 KiB)", async () => {
    const seen = world.upstream.requests.length;
    const body = "x".repeat(9 * 1024);
    const answer = await rawRequest(
      world.port,
      `POST /echo/over HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(answer.responses[0]?.status).toBe(413);
    expect(world.upstream.requests.length).toBe(seen);
    const ok = await rawRequest(
      world.port,
      "POST /echo/under HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    );
    expect(ok.responses[0]?.status).toBe(200);
  });

  it("a chunked body crossing the limit: 413 before any answer, the upstream request aborted", async () => {
    const chunk = `${(4096).toString(16)}\r\n${"y".repeat(4096)}\r\n`;
    const answer = await rawRequest(world.port, "", {
      parts: [
        "POST /echo/chunked HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        chunk,
        chunk,
        chunk,
        chunk,
      ],
      pauseMs: 50,
      timeoutMs: 5_000,
    });
    const res = answer.responses[0]!;
    expect(res.status).toBe(413);
    expect(res.headers.get("bearer-proxy-error")).toEqual(["payload_too_large"]);
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
  });
});
