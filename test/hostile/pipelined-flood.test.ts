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

/**
 * Writes `count` pipelined GETs of `path` on one connection, waits `holdMs`, then hangs up.
 * Resolves with the bytes received and how many requests the upstream had seen at the hang-up.
 */
async function floodThenHangUp(
  path: string,
  count: number,
  holdMs: number,
): Promise<{ received: number; upstreamAtHangUp: number }> {
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
  return { received, upstreamAtHangUp: world.upstream.requests.length };
}

/** Waits until `count()` has not changed for `quietMs` (at most `timeoutMs`); returns it. */
async function quietCount(count: () => number, quietMs: number, timeoutMs: number) {
  const deadline = performance.now() + timeoutMs;
  let last = count();
  let since = performance.now();
  while (performance.now() - since < quietMs) {
    if (performance.now() > deadline) throw new Error("the upstream never went quiet");
    await sleep(20);
    if (count() !== last) {
      last = count();
      since = performance.now();
    }
  }
  return last;
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
    let flood = { received: 0, upstreamAtHangUp: 0 };
    const failures = await livezThroughout(
      floodThenHangUp("/status/204", REQUESTS, 1_500).then((result) => {
        flood = result;
      }),
    );
    expect(await stillAlive(world)).toEqual({ pid: world.pid, live: true });
    expect(failures).toBe(0);
    expect(flood.received).toBeGreaterThan(0);
    expect(world.rssBytes() - rssBefore).toBeLessThan(RSS_GROWTH_LIMIT_BYTES);
    expect(flood.upstreamAtHangUp).toBeGreaterThan(seenBefore);
    // The queue is dropped at the hang-up: the upstream goes quiet after at most the request in
    // flight and the few sent before the proxy saw the close. A kept queue would go on forwarding
    // the rest of its read (~1,400 GETs in a 64 KiB read), one after the other.
    const settled = await quietCount(() => world.upstream.requests.length, 300, 15_000);
    expect(settled - flood.upstreamAtHangUp).toBeLessThan(50);
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
