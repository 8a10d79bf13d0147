/**
 * Issue 14 item 1: thousands of pipelined requests on one connection, then a hang-up. The old
 * per-socket queue drained recursively (handle → next → handle …) and the process died of a
 * stack overflow. Now the queue is drained by a loop, bounded (the socket stops being read
 * beyond `limits.maxPipelinedRequests`) and dropped at once when the connection closes.
 */
import { once } from "node:events";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type HostileWorld,
  RSS_GROWTH_LIMIT_BYTES,
  sleep,
  startHostileWorld,
  stillAlive,
} from "./support/hostile-world.js";

const REQUESTS = 20_000;

let world: HostileWorld;
beforeAll(async () => {
  world = await startHostileWorld();
}, 60_000);
afterAll(() => world?.close());

/** Writes `count` pipelined GETs of `path` on one connection, waits `holdMs`, then hangs up. */
async function floodThenHangUp(path: string, count: number, holdMs: number): Promise<number> {
  const socket = connect(world.port, "127.0.0.1");
  socket.on("error", () => {});
  let received = 0;
  socket.on("data", (chunk: Buffer) => {
    received += chunk.length;
  });
  await once(socket, "connect");
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`.repeat(count));
  await sleep(holdMs);
  socket.destroy();
  return received;
}

/** Polls /livez every 100 ms while `work` runs; resolves with the number of failed probes. */
async function livezThroughout(work: Promise<unknown>): Promise<number> {
  let failures = 0;
  let done = false;
  const probing = (async () => {
    while (!done) {
      if (!(await world.livez(2_000))) failures++;
      await sleep(100);
    }
  })();
  await work.finally(() => {
    done = true;
  });
  await probing;
  return failures;
}

describe("pipelined floods on one connection", () => {
  it("a slow upstream: 20,000 queued GETs then a hang-up leave the same process, live, RSS bounded", async () => {
    const rssBefore = world.rssBytes();
    const failures = await livezThroughout(floodThenHangUp("/slow-headers/100", REQUESTS, 800));
    await sleep(500);
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
    expect(failures).toBe(0);
    const growthMiB = (world.rssBytes() - rssBefore) / 2 ** 20;
    console.log(
      `20,000 pipelined GETs (slow upstream) then a hang-up: RSS +${growthMiB.toFixed(1)} MiB`,
    );
    expect(world.rssBytes() - rssBefore).toBeLessThan(RSS_GROWTH_LIMIT_BYTES);
    // Sequential forwarding at ~100 ms each: the flood never reached the upstream in bulk.
    expect(world.upstream.requests.length).toBeLessThan(50);
  });

  it("a fast upstream: the flood is answered in order while read, then dropped on hang-up", async () => {
    const rssBefore = world.rssBytes();
    const seenBefore = world.upstream.requests.length;
    let received = 0;
    const failures = await livezThroughout(
      floodThenHangUp("/status/204", REQUESTS, 1_500).then((n) => {
        received = n;
      }),
    );
    await sleep(500);
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
    expect(failures).toBe(0);
    expect(received).toBeGreaterThan(0);
    expect(world.rssBytes() - rssBefore).toBeLessThan(RSS_GROWTH_LIMIT_BYTES);
    // Nothing queued is forwarded after the hang-up.
    const seenAtHangUp = world.upstream.requests.length;
    await sleep(500);
    expect(world.upstream.requests.length).toBe(seenAtHangUp);
    expect(seenAtHangUp).toBeGreaterThan(seenBefore);
  });

  it("a second connection is served normally while one connection floods", async () => {
    const flood = floodThenHangUp("/slow-headers/100", REQUESTS, 1_000);
    await sleep(200);
    const res = await fetch(`http://127.0.0.1:${world.port}/status/204`);
    expect(res.status).toBe(204);
    await flood;
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
  });
});
