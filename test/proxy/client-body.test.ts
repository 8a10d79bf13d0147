import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { rawRequest } from "../helpers/raw-http.js";
import { useStubProxy } from "../helpers/stub-proxy.js";
import { waitFor } from "../helpers/wait.js";
import { requestLogs } from "./harness.js";

/** Request bodies that stall or vanish: aborted, answered 408 when still possible, no leak. */
describe("client request bodies", () => {
  const world = useStubProxy({
    upstream: { replayBodyLimit: "64KiB", timeouts: { bodyIdle: "400ms" } },
  });
  /** Until the proxy has finished every request, answered or aborted. */
  const noneInFlight = () =>
    waitFor(() => world.proxy.listeners[0]!.proxy.inFlight() === 0, "no request in flight", 3_000);

  it("a small (buffered) body that stalls → 408 request_timeout, nothing forwarded", async () => {
    const before = world.upstream.requests.length;
    const exchange = await rawRequest(
      world.proxy.port,
      "POST /echo/stall HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n0123456789",
      { timeoutMs: 4_000 },
    );
    expect(exchange.responses[0]?.status).toBe(408);
    expect(exchange.responses[0]?.headers.get("bearer-proxy-error")).toEqual(["request_timeout"]);
    expect(exchange.closed).toBe(true);
    expect(world.upstream.requests.length).toBe(before);
  });

  it("a large (streamed) body that stalls → 408, the upstream request is aborted", async () => {
    const exchange = await rawRequest(
      world.proxy.port,
      `POST /echo/stall-big HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n${"a".repeat(100_000)}`,
      { timeoutMs: 4_000 },
    );
    expect(exchange.responses[0]?.status).toBe(408);
    expect(exchange.closed).toBe(true);
    await noneInFlight();
    expect(requestLogs(world.proxy).at(-1)).toMatchObject({
      status: 408,
      errorCode: "request_timeout",
    });
  });

  it("a client that vanishes mid-upload aborts the upstream request", async () => {
    const openBefore = world.upstream.openSockets();
    await new Promise<void>((resolve) => {
      const socket = connect(world.proxy.port, "127.0.0.1", () => {
        socket.write(
          `POST /echo/gone HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n${"a".repeat(200_000)}`,
        );
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 100);
      });
    });
    await noneInFlight();
    expect(requestLogs(world.proxy).at(-1)).toMatchObject({ errorCode: "client_closed" });
    await waitFor(
      () => world.upstream.openSockets() <= openBefore,
      "the upstream sockets to close",
      3_000,
    );
  });

  it("a chunked upload is streamed through intact", async () => {
    const exchange = await rawRequest(
      world.proxy.port,
      "POST /echo/chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
    );
    const echo = JSON.parse(exchange.responses[0]!.body);
    expect(echo.bodyLength).toBe(11);
    // Re-framed by undici: chunked, or Content-Length when the whole body had already arrived.
    const framing = echo.headers
      .map(([n, v]: [string, string]) => `${n.toLowerCase()}: ${v}`)
      .filter((h: string) => /^(transfer-encoding|content-length):/.test(h));
    expect([["transfer-encoding: chunked"], ["content-length: 11"]]).toContainEqual(framing);
    expect(requestLogs(world.proxy).at(-1)).toMatchObject({ path: "/echo/chunked", bytesIn: 11 });
  });

  it("Expect: 100-continue is answered by the proxy and not forwarded", async () => {
    const exchange = await rawRequest(
      world.proxy.port,
      "POST /echo/expect HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\nConnection: close\r\n\r\nabc",
    );
    const final = exchange.responses.find((r) => r.status === 200)!;
    const echo = JSON.parse(final.body);
    expect(echo.bodyLength).toBe(3);
    expect(echo.headers.some(([n]: [string]) => n.toLowerCase() === "expect")).toBe(false);
  });
});
