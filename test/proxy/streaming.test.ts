import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EchoResponse, sha256OfDownload } from "../../src/emulator/index.js";
import { useEmulator } from "../helpers/emulator.js";
import { startTestProxy, type TestProxy } from "./harness.js";

const MIB = 1024 * 1024;
const SIZE = 50 * MIB;

/** V8's gc(), exposed at run time (vitest's workers don't start with --expose-gc). */
function exposeGc(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

/**
 * Memory this process (proxy, client and emulator together) still holds: heap plus Buffers.
 * Two collections, because V8 frees dead ArrayBuffers' memory on a concurrent sweeper: after one
 * gc(), `external` can still count tens of MiB of dead chunks (0–63 MiB at random on Node 24),
 * and the next collection waits for that sweep to finish. `external` includes `arrayBuffers`.
 */
function liveBytes(gc: () => void): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.external;
}

/**
 * What the pipeline holds while a transfer is paused part way. Sampling a running transfer only
 * sees buffering if a sample lands just before the body is let go, and a fast machine moves
 * 50 MiB between two samples; a pause holds the moment still. A streaming pipeline holds only
 * what was in flight (the kernel's socket buffers are not counted). One that buffers the body
 * holds what it has read, and one that ignores backpressure keeps reading while the pause lasts:
 * half a second is time for it to take in tens of MiB on loopback (a busy machine takes in less,
 * which weakens the check but never fails a sound pipeline).
 */
async function liveWhilePaused(gc: () => void, baseline: number): Promise<number> {
  await new Promise((r) => setTimeout(r, 500));
  return (liveBytes(gc) - baseline) / MIB;
}

/** Buffering would hold ≥ 36 MiB at each pause below; streaming holds under 1 (quiet or busy). */
const HELD_BOUND_MIB = 20;

function report(what: string, heldMiB: number) {
  console.log(
    `${what}: live memory while paused ${heldMiB >= 0 ? "+" : ""}${heldMiB.toFixed(1)} MiB (proxy + client + emulator)`,
  );
}

/**
 * `total` bytes of a repeating pattern, produced lazily in fresh 64 KiB chunks (so a copy held
 * anywhere, the client included, counts). After `pauseAt` bytes it stops producing until
 * `resume()`; `paused` resolves when it gets there.
 */
function patternStream(total: number, pauseAt: number) {
  const pattern = Buffer.alloc(64 * 1024);
  for (let i = 0; i < pattern.length; i++) pattern[i] = (i * 31) & 0xff;
  const hash = createHash("sha256");
  for (let sent = 0; sent < total; sent += pattern.length)
    hash.update(pattern.subarray(0, Math.min(pattern.length, total - sent)));
  let sent = 0;
  const next = () => {
    if (sent >= total) return null;
    const size = Math.min(pattern.length, total - sent);
    sent += size;
    return Buffer.from(pattern.subarray(0, size));
  };
  let reachedPause!: () => void;
  const paused = new Promise<void>((r) => {
    reachedPause = r;
  });
  let resume = () => {};
  let hasPaused = false;
  const stream = new Readable({
    read() {
      if (sent === pauseAt && !hasPaused) {
        hasPaused = true;
        resume = () => this.push(next());
        reachedPause();
        return;
      }
      this.push(next());
    },
  });
  return { stream, sha256: hash.digest("hex"), paused, resume: () => resume() };
}

/** Generous: 2–4 s on an idle machine, much more when the CI box is busy. */
const TRANSFER_TIMEOUT_MS = 120_000;

describe("50 MiB through the proxy, streaming both ways without holding the body", () => {
  const emulator = useEmulator();
  let proxy: TestProxy;
  const client = new Agent();

  beforeAll(async () => {
    proxy = await startTestProxy({
      caPem: emulator().caPem,
      tokens: "real",
      logLevel: "warn",
      config: { upstreams: [{ name: "api", baseUrl: emulator().url }] },
    });
    const warm = await request(`${proxy.url}/echo/warm`, { dispatcher: client });
    await warm.body.text();
  });
  afterAll(async () => {
    await client.close();
    await proxy.close();
  });

  it(
    "upload: the upstream hashes exactly what the client sent, and nothing holds the body",
    async () => {
      const gc = exposeGc();
      const { stream, sha256, paused, resume } = patternStream(SIZE, 40 * MIB);
      const baseline = liveBytes(gc);
      const answered = request(`${proxy.url}/echo/upload`, {
        method: "PUT",
        body: stream,
        headers: { "content-length": String(SIZE) },
        dispatcher: client,
      });
      // The emulator answers only at the body's end, so an answer before the pause is a failure.
      await Promise.race([
        paused,
        answered.then((r) =>
          Promise.reject(new Error(`answered ${r.statusCode} before the pause`)),
        ),
      ]);
      const held = await liveWhilePaused(gc, baseline);
      resume();
      const response = await answered;
      const echo = (await response.body.json()) as EchoResponse;
      expect(response.statusCode).toBe(200);
      expect(echo.bodyLength).toBe(SIZE);
      expect(echo.bodySha256).toBe(sha256);
      report("upload paused after 40 of 50 MiB", held);
      expect(held).toBeLessThan(HELD_BOUND_MIB);
    },
    TRANSFER_TIMEOUT_MS,
  );

  it(
    "download: the client hashes exactly what the upstream sent, and a reader that stops stops the upstream",
    async () => {
      const gc = exposeGc();
      const baseline = liveBytes(gc);
      const response = await request(`${proxy.url}/download/${SIZE}`, { dispatcher: client });
      const hash = createHash("sha256");
      let length = 0;
      let held: number | undefined;
      for await (const chunk of response.body) {
        hash.update(chunk as Buffer);
        length += (chunk as Buffer).length;
        // Not reading is backpressure: the upstream must stop too, not fill the proxy's memory.
        if (held === undefined && length >= 10 * MIB) held = await liveWhilePaused(gc, baseline);
      }
      expect(response.statusCode).toBe(200);
      expect(length).toBe(SIZE);
      expect(hash.digest("hex")).toBe(sha256OfDownload(SIZE));
      report("download paused after 10 of 50 MiB", held!);
      expect(held).toBeLessThan(HELD_BOUND_MIB);
    },
    TRANSFER_TIMEOUT_MS,
  );

  it(
    "a slow reader gets every byte, in order, through many pauses",
    async () => {
      const response = await request(`${proxy.url}/download/${20 * MIB}`, { dispatcher: client });
      const hash = createHash("sha256");
      let length = 0;
      for await (const chunk of response.body) {
        hash.update(chunk as Buffer);
        length += (chunk as Buffer).length;
        // ~ 64 KiB per 2 ms: a reader several times slower than loopback.
        await new Promise((r) => setTimeout(r, 2));
      }
      expect(length).toBe(20 * MIB);
      expect(hash.digest("hex")).toBe(sha256OfDownload(20 * MIB));
    },
    TRANSFER_TIMEOUT_MS,
  );
});
