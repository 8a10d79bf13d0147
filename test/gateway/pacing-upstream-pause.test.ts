import type { IncomingMessage, ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { createTestPki } from "../helpers/tls.js";
import { sleep } from "../helpers/wait.js";
import {
  metricsText,
  metricValue,
  send,
  upstreamEntry,
  upstreamStatus,
} from "../pacing/support/gateway.js";

/**
 * Issue 26, done-when 4: an upstream's 429 or 503 with Retry-After pauses its traffic, with or
 * without a `rateLimit`: the answer is relayed unchanged, nothing reaches the upstream until the
 * time it named, requests that may wait that long wait and then go, the others are answered 429
 * `upstream_rate_limited` with the remaining Retry-After. Two upstream entries spending one
 * credential at one origin share the pause when they say so (`pauseScope: credential`; the
 * default scope is the entry alone: see fix-issue-30-retry-after-scope.test.ts).
 */

describe("an upstream's Retry-After pauses its traffic", () => {
  let emulator: Emulator;
  let upstream: FakeUpstream;
  let gateway: AppUnderTest;
  /** What the upstream answers next (once); 200 "ok" otherwise. */
  let next: { status: number; retryAfter: string } | undefined;
  /** When each request reached the upstream (performance.now), by path. */
  const arrivals: { path: string; atMs: number }[] = [];

  const handler = (req: IncomingMessage, res: ServerResponse) => {
    arrivals.push({ path: req.url ?? "", atMs: performance.now() });
    req.resume();
    const answer = next;
    next = undefined;
    if (answer) {
      res.writeHead(answer.status, {
        "content-type": "text/plain",
        "retry-after": answer.retryAfter,
        "x-upstream": "said so",
      });
      res.end("slow down");
      return;
    }
    res.writeHead(200, { "content-type": "text/plain", "content-length": 2 });
    res.end("ok");
  };

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    upstream = await startFakeUpstream({ cert: pki.good, handler });
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        upstreams: [
          // No limit of their own: only the upstream's answers hold requests (up to 10 s), and
          // (pauseScope: credential) an answer to one holds both (issue 30 item 4).
          upstreamEntry("open", upstream.origin, emulator, {
            rateLimit: { pauseScope: "credential" },
          }),
          upstreamEntry("alias", upstream.origin, emulator, {
            rateLimit: { pauseScope: "credential" },
          }),
          upstreamEntry("impatient", upstream.origin, emulator, {
            // Another credential (scope), so its own pause; a wait shorter than that pause.
            tokenParams: { audience: "impatient" },
            rateLimit: { requests: 100, per: "1s", wait: "3s" },
          }),
        ],
      },
    });
    // Tokens fetched, connections open.
    for (const name of ["open", "alias", "impatient"]) {
      const warm = await send(`${gateway.url}/${name}/warm`);
      expect(warm.status, warm.text).toBe(200);
    }
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([upstream?.close(), emulator?.close()]);
  });

  it("without rateLimit: holds new requests until Retry-After, then sends them", async () => {
    const pauseMs = 4_000;
    next = { status: 429, retryAfter: String(pauseMs / 1_000) };
    // The pause starts when the 429 reaches the proxy: between these two readings of each clock.
    const sentMs = performance.now();
    const sentWallMs = Date.now();
    const first = await send(`${gateway.url}/open/one`);
    const pausedAtMs = performance.now();
    const answeredWallMs = Date.now();
    // The upstream's own answer, unchanged: its status, Retry-After and body.
    expect(first.status).toBe(429);
    expect(first.code).toBeUndefined();
    expect(first.headers["retry-after"]).toBe(String(pauseMs / 1_000));
    expect(first.headers["x-upstream"]).toBe("said so");
    expect(first.text).toBe("slow down");

    // Its end, 4 s after the 429, and what is left of it when /status answers (10 ms for the
    // rounding to hundredths of a second and to whole milliseconds).
    const askedMs = performance.now();
    const status = await upstreamStatus(gateway.adminUrl, "open");
    const toldMs = performance.now();
    expect(status.rateLimit).toMatchObject({ limit: null, pause: { reason: "429" } });
    const pause = status.rateLimit?.pause as { until: string; remainingSeconds: number };
    expect(Date.parse(pause.until)).toBeGreaterThanOrEqual(sentWallMs + pauseMs - 10);
    expect(Date.parse(pause.until)).toBeLessThanOrEqual(answeredWallMs + pauseMs + 10);
    expect(pause.remainingSeconds * 1_000).toBeGreaterThanOrEqual(sentMs + pauseMs - toldMs - 10);
    expect(pause.remainingSeconds * 1_000).toBeLessThanOrEqual(pausedAtMs + pauseMs - askedMs + 10);

    const before = arrivals.length;
    // The same credential at the same origin under another entry: paused too. Held to the end of
    // the pause, they reach the upstream and answer at least 4 s after the 429 was sent, however
    // long the /status scrape above took (its first call builds the admin server); sent after
    // the pause, they would not have waited (the wait count below).
    const waiting = await Promise.all([
      send(`${gateway.url}/open/two`),
      send(`${gateway.url}/open/three`),
      send(`${gateway.url}/alias/four`),
    ]);
    const answeredMs = performance.now();
    expect(waiting.map((a) => a.status)).toEqual([200, 200, 200]);
    const during = arrivals.slice(before);
    expect(during).toHaveLength(3);
    for (const arrival of during) expect(arrival.atMs - sentMs).toBeGreaterThanOrEqual(pauseMs);
    expect(answeredMs - sentMs).toBeGreaterThanOrEqual(pauseMs);
    console.log(
      `pause ${pauseMs / 1_000} s: first arrival after it ${Math.round(Math.min(...during.map((a) => a.atMs)) - pausedAtMs)} ms after the 429; waits ${waiting.map((a) => Math.round(a.ms)).join(", ")} ms`,
    );

    const metrics = await metricsText(gateway.adminUrl);
    expect(
      metricValue(metrics, "bearer_proxy_rate_limited_total", {
        upstream: "open",
        reason: "upstream_429",
      }),
    ).toBe(1);
    expect(
      metricValue(metrics, "bearer_proxy_rate_limit_wait_seconds_count", { upstream: "open" }),
    ).toBe(2);
  }, 20_000);

  it("a request that may not wait so long is answered 429 upstream_rate_limited at once", async () => {
    // A 7 s pause against a 3 s wait: whoever comes within 4 s of the 503 can't outlast it.
    const pauseMs = 7_000;
    next = { status: 503, retryAfter: String(pauseMs / 1_000) };
    const sentMs = performance.now();
    const first = await send(`${gateway.url}/impatient/one`);
    const pausedAtMs = performance.now();
    expect(first.status).toBe(503);
    expect(first.headers["retry-after"]).toBe(String(pauseMs / 1_000));
    const before = arrivals.length;
    const refusedAtMs = performance.now();
    const refused = await Promise.all([
      send(`${gateway.url}/impatient/two`),
      send(`${gateway.url}/impatient/three`),
    ]);
    for (const answer of refused) {
      expect(answer.status).toBe(429);
      expect(answer.code).toBe("upstream_rate_limited");
      // What is left of the pause, in whole seconds rounded up, when the refusal was made.
      const retryAfter = Number(answer.headers["retry-after"]);
      expect(retryAfter).toBeGreaterThanOrEqual(
        Math.ceil((sentMs + pauseMs - (refusedAtMs + answer.ms) - 1) / 1_000),
      );
      expect(retryAfter).toBeLessThanOrEqual(
        Math.ceil((pausedAtMs + pauseMs - refusedAtMs + 1) / 1_000),
      );
      expect(answer.headers["ratelimit-policy"]).toBe('"default";q=100;w=1');
      expect(answer.headers.ratelimit).toBe(`"default";r=0;t=${retryAfter}`);
      // At once: held until its 3 s wait ran out, it would take 3 s.
      expect(answer.ms).toBeLessThan(1_500);
    }
    // Another credential is not paused.
    expect((await send(`${gateway.url}/open/five`)).status).toBe(200);
    expect(arrivals.slice(before).map((a) => a.path)).toEqual(["/five"]);
    const status = await upstreamStatus(gateway.adminUrl, "impatient");
    expect(status.rateLimit).toMatchObject({ pause: { reason: "503" } });
    // Once it is over (7 s after the 503 reached the proxy, at the latest), requests go again.
    await sleep(pausedAtMs + pauseMs + 100 - performance.now());
    expect((await send(`${gateway.url}/impatient/six`)).status).toBe(200);
    const metrics = await metricsText(gateway.adminUrl);
    expect(
      metricValue(metrics, "bearer_proxy_rate_limited_total", {
        upstream: "impatient",
        reason: "upstream_503",
      }),
    ).toBe(1);
    expect(
      metricValue(metrics, "bearer_proxy_rate_limited_total", {
        upstream: "impatient",
        reason: "paused",
      }),
    ).toBe(2);
  }, 20_000);
});
