/**
 * Issue 14 item 9: a client may hang up at any point of its request. Each path below used to
 * have, or could have, an emitter whose 'error' nobody listened to; the worst was the streamed
 * upload waiting in undici's pool queue (no free connection): its stream emitted
 * `ClientBodyError` with no listener and the process died. Each case asserts the same process
 * still answers, and that nothing the client abandoned reaches the upstream afterwards.
 */
import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type HostileWorld,
  sleep,
  startHostileWorld,
  stillAlive,
  upstreamReached,
} from "./support/hostile-world.js";

let world: HostileWorld;
beforeAll(async () => {
  // Two pooled connections (with one, undici uses a bare Client, which has no pool queue): two
  // slow requests take both, so a third has to wait in the pool's queue.
  world = await startHostileWorld({ upstream: { connections: 2 } });
}, 60_000);
afterAll(() => world?.close());

async function open(): Promise<Socket> {
  const socket = connect(world.port, "127.0.0.1");
  socket.on("error", () => {});
  await once(socket, "connect");
  return socket;
}

const head = (method: string, path: string, extra = "") =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`;

describe("client hang-ups", () => {
  it("before dispatch: while its buffered body is being read", async () => {
    const socket = await open();
    socket.write(head("POST", "/echo/before", "Content-Length: 2000\r\n") + "x".repeat(10));
    await sleep(200);
    socket.destroy();
    await sleep(300);
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
    expect(world.upstream.requests.some((r) => r.url === "/echo/before")).toBe(false);
  });

  it("while queued for a pooled connection, with a streamed upload", async () => {
    const since = world.upstream.requests.length;
    const holders = [0, 1].map(() => request(`http://127.0.0.1:${world.port}/slow-headers/1500`));
    await upstreamReached(world, { pathPrefix: "/slow-headers/", count: 2, since });
    const socket = await open();
    socket.write(`${head("POST", "/echo/queued", "Transfer-Encoding: chunked\r\n")}5\r\nhello\r\n`);
    await sleep(300);
    socket.destroy();
    await sleep(300);
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
    for (const held of await Promise.all(holders)) await held.body.dump();
    await sleep(300);
    // The abandoned request was dropped when the connection came free, not sent.
    expect(world.upstream.requests.some((r) => r.url === "/echo/queued")).toBe(false);
    const after = await request(`http://127.0.0.1:${world.port}/status/204`);
    await after.body.dump();
    expect(after.statusCode).toBe(204);
  });

  it("mid-body: a streamed upload the upstream is reading", async () => {
    const socket = await open();
    socket.write(head("POST", "/echo/mid-body", "Transfer-Encoding: chunked\r\n"));
    for (let i = 0; i < 5; i++) {
      socket.write(`400\r\n${"z".repeat(1024)}\r\n`);
      await sleep(50);
    }
    socket.destroy();
    await sleep(300);
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
  });

  it("mid-response: a large download", async () => {
    const socket = await open();
    socket.write(head("GET", "/download/50000000"));
    await once(socket, "data");
    socket.destroy();
    await sleep(300);
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
    const after = await request(`http://127.0.0.1:${world.port}/status/204`);
    await after.body.dump();
    expect(after.statusCode).toBe(204);
  });
});
