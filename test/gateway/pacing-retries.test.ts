import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { freePort } from "../helpers/redis-server.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { sleep, waitFor } from "../helpers/wait.js";
import {
  type Answer,
  metricsText,
  metricValue,
  send,
  upstreamEntry,
  upstreamStatus,
} from "../pacing/support/gateway.js";

/**
 * Issue 26, done-when 5 and 6: retries under `upstreams[].retry`. What a second copy can't harm
 * (RFC 9110 §9.2.2: GET, PUT, DELETE …, or any request with an Idempotency-Key) survives a
 * reset and an upstream restart; a POST without Idempotency-Key reaches the upstream once and
 * its client gets the error. 502/503/504 are retried only when listed. The budget caps retries
 * however many requests fail.
 */

let pki: TestPki;
let emulator: Emulator;

beforeAll(async () => {
  pki = await createTestPki();
  emulator = await startTlsEmulator(pki);
});
afterAll(async () => {
  await emulator?.close();
});

describe("retries that are safe, and only those", () => {
  let upstream: FakeUpstream;
  let gateway: AppUnderTest;
  /** Requests that reached the upstream whole, by `METHOD path`. */
  const seen = new Map<string, number>();

  /**
   * `/reset-once/<id>`: the first request for an id is read whole, then its connection is cut
   * without an answer (the upstream crashed after acting on it); later ones get 200.
   * `/status-once/<code>/<id>`: the first gets <code>, later ones 200.
   * `/always-reset/…`: every request is cut.
   */
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.once("end", () => {
      const key = `${req.method} ${req.url}`;
      const count = (seen.get(key) ?? 0) + 1;
      seen.set(key, count);
      const path = req.url ?? "";
      if ((path.startsWith("/reset-once/") && count === 1) || path.startsWith("/always-reset/")) {
        req.socket.destroy();
        return;
      }
      const status = /^\/status-once\/(\d{3})\//.exec(path);
      if (status && count === 1) {
        res.writeHead(Number(status[1]), { "content-type": "text/plain" });
        res.end("try again");
        return;
      }
      res.writeHead(200, { "content-type": "text/plain", "content-length": 2 });
      res.end("ok");
    });
  };

  beforeAll(async () => {
    upstream = await startFakeUpstream({ cert: pki.good, handler });
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        upstreams: [
          // The defaults: one retry on connect and reset, budget 20%.
          upstreamEntry("api", upstream.origin, emulator),
          upstreamEntry("listed", upstream.origin, emulator, {
            retry: { on: ["connect", "reset", "503", "504"] },
          }),
          upstreamEntry("off", upstream.origin, emulator, { retry: { attempts: 0 } }),
          upstreamEntry("budget", upstream.origin, emulator, {
            retry: { attempts: 3, budget: "20%" },
          }),
        ],
      },
    });
    for (const name of ["api", "listed", "off", "budget"]) {
      expect((await send(`${gateway.url}/${name}/warm`)).status).toBe(200);
    }
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
  });

  const times = (key: string) => seen.get(key) ?? 0;

  it("retries a GET, a PUT and a POST with Idempotency-Key after a reset", async () => {
    const get = await send(`${gateway.url}/api/reset-once/a`);
    const put = await send(`${gateway.url}/api/reset-once/b`, { method: "PUT", body: "{}" });
    const keyed = await send(`${gateway.url}/api/reset-once/c`, {
      method: "POST",
      body: '{"order":1}',
      headers: { "idempotency-key": "order-1" },
    });
    expect([get.status, put.status, keyed.status]).toEqual([200, 200, 200]);
    expect(times("GET /reset-once/a")).toBe(2);
    expect(times("PUT /reset-once/b")).toBe(2);
    expect(times("POST /reset-once/c")).toBe(2);
  });

  it("never sends a POST without Idempotency-Key twice: its client gets the reset", async () => {
    const post = await send(`${gateway.url}/api/reset-once/d`, {
      method: "POST",
      body: '{"order":2}',
    });
    expect(post.status).toBe(502);
    expect(post.code).toBe("upstream_reset");
    expect(times("POST /reset-once/d")).toBe(1);
  });

  it("retries a listed 503 or 504 and relays an unlisted 502", async () => {
    const listed = await send(`${gateway.url}/listed/status-once/503/a`);
    expect(listed.status).toBe(200);
    expect(times("GET /status-once/503/a")).toBe(2);
    const unlisted = await send(`${gateway.url}/listed/status-once/502/b`);
    expect(unlisted.status).toBe(502);
    expect(unlisted.text).toBe("try again");
    expect(unlisted.code).toBeUndefined();
    expect(times("GET /status-once/502/b")).toBe(1);
    // A listed status on a request that is not safe to repeat: relayed as it came.
    const post = await send(`${gateway.url}/listed/status-once/504/c`, {
      method: "POST",
      body: "{}",
    });
    expect(post.status).toBe(504);
    expect(post.text).toBe("try again");
    expect(times("POST /status-once/504/c")).toBe(1);
  });

  it("retry.attempts 0 retries nothing", async () => {
    const get = await send(`${gateway.url}/off/reset-once/e`);
    expect(get.status).toBe(502);
    expect(times("GET /reset-once/e")).toBe(1);
  });

  it("the budget caps retries: 100 failing requests, 3 attempts each, 30 retries", async () => {
    const answers: Answer[] = [];
    for (let round = 0; round < 10; round++) {
      answers.push(
        ...(await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            send(`${gateway.url}/budget/always-reset/${round}-${i}`),
          ),
        )),
      );
    }
    expect(answers.map((a) => a.code)).toEqual(Array(100).fill("upstream_reset"));
    let arrivals = 0;
    for (const [key, count] of seen) if (key.startsWith("GET /always-reset/")) arrivals += count;
    const metrics = await metricsText(gateway.adminUrl);
    const retries = metricValue(metrics, "bearer_proxy_retries_total", { upstream: "budget" });
    console.log(`budget: 100 requests, ${retries} retries, ${arrivals} upstream arrivals`);
    // 20% of 101 requests is 20; the floor is 3 per second over the 10 s window: 30.
    expect(retries).toBe(30);
    expect(arrivals).toBe(130);
    const status = await upstreamStatus(gateway.adminUrl, "budget");
    expect(status.rateLimit).toMatchObject({
      limit: null,
      retry: { attempts: 3, retries: 30, allowedRetries: 30 },
    });
  }, 60_000);

  it("counts retries by reason", async () => {
    const metrics = await metricsText(gateway.adminUrl);
    expect(
      metricValue(metrics, "bearer_proxy_retries_total", { upstream: "api", reason: "reset" }),
    ).toBe(3);
    expect(
      metricValue(metrics, "bearer_proxy_retries_total", { upstream: "listed", reason: "503" }),
    ).toBe(1);
  });
});

describe("an upstream restart", () => {
  let port: number;
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  const counts = { get: 0, post: 0 };
  let gateway: AppUnderTest;

  /** GET answers at once; POST after 300 ms (so one is in flight when the upstream stops). */
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.once("end", () => {
      if (req.method === "POST") {
        counts.post++;
        setTimeout(() => res.end("created"), 300).unref();
        return;
      }
      counts.get++;
      res.end("ok");
    });
  };

  async function startUpstream(): Promise<void> {
    const next = createServer({ cert: pki.good.certPem, key: pki.good.keyPem }, handler);
    next.on("connection", (socket: Socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
    });
    next.on("tlsClientError", () => {});
    await new Promise<void>((resolve) => next.listen(port, "127.0.0.1", resolve));
    server = next;
  }

  /** Like a crashed process: every connection cut, the port closed. */
  async function stopUpstream(): Promise<void> {
    const stopping = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => stopping?.close(() => resolve()) ?? resolve());
  }

  beforeAll(async () => {
    port = await freePort();
    await startUpstream();
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        upstreams: [
          upstreamEntry("orders", `https://127.0.0.1:${port}`, emulator, {
            retry: { attempts: 5 },
            timeouts: { connect: "1s" },
          }),
        ],
      },
    });
    expect((await send(`${gateway.url}/orders/warm`)).status).toBe(200);
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await stopUpstream();
  });

  it("idempotent requests survive it; the POST in flight is not sent again", async () => {
    counts.get = 0;
    counts.post = 0;
    // Four clients keep sending GETs, one at a time each, for 1.6 s.
    const endMs = performance.now() + 1_600;
    const loops = Array.from({ length: 4 }, async () => {
      const answers: Answer[] = [];
      while (performance.now() < endMs) answers.push(await send(`${gateway.url}/orders/list`));
      return answers;
    });
    await sleep(200);
    const post = send(`${gateway.url}/orders/create`, { method: "POST", body: '{"n":1}' });
    // The upstream answers it 300 ms after it arrives: stop it in between.
    await waitFor(() => counts.post === 1, "the POST at the upstream", 10_000);
    // Down for 100 ms while the POST is being processed and GETs keep coming. (Five retries
    // back off 50, 100, 200, 400, 800 ms at most, with full jitter: about 0.8 s on average. The
    // chance that all five fit inside the outage grows with its fifth power: a 200 ms outage lost
    // one GET of 866 in CI once, and a loaded machine stretches the sleep; 100 ms leaves that
    // ~32 times rarer and still meets GETs at the closed port.)
    await stopUpstream();
    await sleep(100);
    await startUpstream();
    const gets = (await Promise.all(loops)).flat();
    const posted = await post;
    const metrics = await metricsText(gateway.adminUrl);
    const retried = (reason: string) =>
      metricValue(metrics, "bearer_proxy_retries_total", { upstream: "orders", reason });
    console.log(
      `restart: ${gets.filter((a) => a.status === 200).length}/${gets.length} GETs ok (${retried("connect")} connect and ${retried("reset")} reset retries); POST ${posted.status} ${posted.code}, reached the upstream ${counts.post}×`,
    );
    expect(gets.length).toBeGreaterThan(8);
    expect(gets.filter((a) => a.status !== 200).map((a) => a.code)).toEqual([]);
    expect(posted.status).toBe(502);
    expect(posted.code).toBe("upstream_reset");
    expect(counts.post).toBe(1);
    expect(retried("connect")).toBeGreaterThan(0);
  }, 30_000);
});
