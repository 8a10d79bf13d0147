/**
 * Issue 14 item 2: slow readers, slow uploaders and a full pool. undici's body timeout doesn't
 * run while a response is paused by backpressure, and requests waiting for a pooled connection
 * had no deadline: N clients that stop reading froze an upstream with `connections: N`. Now
 * `limits.minResponseRate` cuts them off (and frees the upstream connection),
 * `limits.minRequestBodyRate` ends dribbled uploads with 408, and `timeouts.queue` answers
 * 503 upstream_busy to a request no connection came free for.
 */
import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawRequest } from "../helpers/raw-http.js";
import {
  type HostileWorld,
  RSS_GROWTH_LIMIT_BYTES,
  sleep,
  startHostileWorld,
  stillAlive,
  upstreamReached,
} from "./support/hostile-world.js";

const POOL = 2;

let world: HostileWorld;
beforeAll(async () => {
  world = await startHostileWorld({
    limits: { minResponseRate: 1_000_000, minDataRateGrace: "1s" },
    upstream: { connections: POOL, timeouts: { bodyIdle: "2s", queue: "1s" } },
  });
}, 60_000);
afterAll(() => world?.close());

/** Asks for a large download and never reads the answer. */
async function slowReader(): Promise<Socket> {
  const socket = connect(world.port, "127.0.0.1");
  socket.on("error", () => {});
  await once(socket, "connect");
  socket.pause();
  socket.write("GET /download/200000000 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  return socket;
}

describe("slow peers", () => {
  it("as many non-reading clients as pooled connections: a normal client is still answered in time", async () => {
    const rssBefore = world.rssBytes();
    const readers = await Promise.all(Array.from({ length: POOL }, slowReader));
    // Let the readers' buffers fill and the pool be taken.
    await sleep(500);
    const started = Date.now();
    const res = await request(`http://127.0.0.1:${world.port}/status/204`, {
      headersTimeout: 8_000,
    });
    await res.body.dump();
    const waitedMs = Date.now() - started;
    // 204 once a reader was cut off, or 503 upstream_busy if the queue deadline came first:
    // either way an answer well within the deadline, never a hang.
    console.log(
      `${POOL} non-reading clients on a pool of ${POOL}: a normal request got ${res.statusCode} after ${waitedMs} ms`,
    );
    expect([204, 503]).toContain(res.statusCode);
    expect(waitedMs).toBeLessThan(8_000);
    await sleep(2_500);
    const after = await request(`http://127.0.0.1:${world.port}/status/204`, {
      headersTimeout: 3_000,
    });
    await after.body.dump();
    expect(after.statusCode).toBe(204);
    for (const reader of readers) reader.destroy();
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
    expect(world.rssBytes() - rssBefore).toBeLessThan(RSS_GROWTH_LIMIT_BYTES);
    const cut = world.logs().filter((l) => l.errorCode === "client_too_slow");
    expect(cut.length).toBeGreaterThanOrEqual(1);
  });

  it("no pooled connection comes free within timeouts.queue: 503 upstream_busy with Retry-After", async () => {
    const since = world.upstream.requests.length;
    const holders = Array.from({ length: POOL }, () =>
      request(`http://127.0.0.1:${world.port}/slow-headers/4000`, { headersTimeout: 10_000 }),
    );
    await upstreamReached(world, { pathPrefix: "/slow-headers/", count: POOL, since });
    const started = Date.now();
    const res = await request(`http://127.0.0.1:${world.port}/status/204`, {
      headersTimeout: 8_000,
    });
    const body = (await res.body.json()) as { error: { code: string } };
    expect(res.statusCode).toBe(503);
    expect(res.headers["bearer-proxy-error"]).toBe("upstream_busy");
    expect(res.headers["retry-after"]).toBe("1");
    expect(body.error.code).toBe("upstream_busy");
    expect(Date.now() - started).toBeLessThan(3_500);
    for (const held of await Promise.all(holders)) await held.body.dump();
    // The abandoned request never reached the upstream once a connection came free.
    await sleep(300);
    const statusRequests = world.upstream.requests.filter((r) => r.url === "/status/204");
    const answered = await request(`http://127.0.0.1:${world.port}/status/204`);
    await answered.body.dump();
    expect(answered.statusCode).toBe(204);
    expect(world.upstream.requests.filter((r) => r.url === "/status/204").length).toBe(
      statusRequests.length + 1,
    );
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
  });

  it("an upload dribbling one byte just inside bodyIdle is ended with 408 (minRequestBodyRate)", async () => {
    const head =
      "POST /echo/dribble HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    const parts: string[] = [head];
    for (let i = 0; i < 8; i++) parts.push("1\r\nx\r\n");
    const started = Date.now();
    const answer = await rawRequest(world.port, "", {
      parts,
      pauseMs: 1_500,
      timeoutMs: 12_000,
    });
    expect(answer.responses[0]?.status).toBe(408);
    expect(answer.responses[0]?.headers.get("bearer-proxy-error")).toEqual(["request_timeout"]);
    expect(answer.responses[0]?.body).toContain("minRequestBodyRate");
    // Grace (1 s) + one check: well before the 8 × 1.5 s the dribble would take.
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
  });
});
