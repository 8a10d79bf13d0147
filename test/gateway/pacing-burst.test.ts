import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { sleep } from "../helpers/wait.js";
import {
  burst,
  metricsText,
  metricValue,
  send,
  upstreamEntry,
  upstreamStatus,
} from "../pacing/support/gateway.js";
import {
  startUpstreamProcess,
  type UpstreamProcess,
} from "../pacing/support/limited-upstream-process.js";

/**
 * Issue 26, done-when 1: a legacy client that never retries fires 100 requests at once at an
 * API that allows 20 in any rolling second (its own process, timing arrivals on its own clock).
 * Paced, every one succeeds and the upstream answers no 429; unpaced, most fail. The answers
 * carry the RateLimit fields, /status shows the queue while it drains, /metrics the waits.
 *
 * The proxy paces at 16 per second, evenly (burst 0), not at the upstream's 20: the pacer
 * leaves 2% of `per` (20 ms) for delivery jitter, which suits a network, but on this shared
 * 2-core machine (load average 10 and more while the suite runs) a request now and then reaches
 * the upstream 50–200 ms after it left the pacer (measured). At 16 per second a request would
 * have to arrive 275 ms late to make a 21st in one second. A `burst` would make it worse here:
 * the window cap releases the next burst exactly one window after the previous one, so one late
 * burst is burst + 1 extra requests in a second. test/pacing/ covers bursts with the pacer
 * alone, with a margin for this machine's jitter.
 */

const LIMIT = 20;
const PACED = 16;

describe("a 100-request burst against an upstream allowing 20 per rolling second", () => {
  let emulator: Emulator;
  let paced: UpstreamProcess;
  let unpaced: UpstreamProcess;
  let gateway: AppUnderTest;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    [paced, unpaced] = await Promise.all([
      startUpstreamProcess({ cert: pki.good, limit: LIMIT }),
      startUpstreamProcess({ cert: pki.good, limit: LIMIT }),
    ]);
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        upstreams: [
          upstreamEntry("reports", paced.origin, emulator, {
            rateLimit: { requests: PACED, per: "1s", wait: "10s" },
          }),
          upstreamEntry("unpaced", unpaced.origin, emulator),
          // One request per 2 s, none may wait: the rest of a burst is refused at once.
          upstreamEntry("strict", paced.origin, emulator, {
            rateLimit: { requests: 5, per: "10s", wait: "0s" },
          }),
          upstreamEntry("slow", paced.origin, emulator, {
            rateLimit: { requests: 1, per: "3s", wait: "30s" },
          }),
        ],
      },
    });
    // A warm pool, as in a running gateway: a cold burst's first requests would wait for TLS
    // handshakes and reach the upstream late, bunched with the next ones.
    await burst(`${gateway.url}/reports/`, 6);
    await burst(`${gateway.url}/unpaced/`, 6);
    await sleep(1_200);
    await Promise.all([paced.reset(), unpaced.reset()]);
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([paced?.close(), unpaced?.close(), emulator?.close()]);
  });

  it("paced: 100/100 succeed, no upstream 429, never more than the limit in any second", async () => {
    const startMs = performance.now();
    const answers = burst(`${gateway.url}/reports/`, 100);
    // While it drains, /status shows the queue.
    await sleep(1_000);
    const during = await upstreamStatus(gateway.adminUrl, "reports");
    const results = await answers;
    const tookMs = performance.now() - startMs;
    const stats = await paced.stats();
    const most = await paced.maxInAnyWindow();
    console.log(
      `burst: ${results.filter((a) => a.status === 200).length}/100 ok in ${Math.round(tookMs)} ms; upstream: ${stats.accepted} accepted, ${stats.rejected} 429, at most ${most} in any second`,
    );
    expect(results.map((a) => a.status)).toEqual(Array(100).fill(200));
    expect(stats.rejected).toBe(0);
    expect(stats.accepted).toBe(100);
    expect(most).toBeLessThanOrEqual(LIMIT);
    // One every 63.75 ms: at least 6.3 s. No tight upper bound: a timer that fires late on a
    // loaded machine pushes the next turn (spacing counts from the real departure, or the upstream
    // would see a catch-up burst), and a full suite beside other work measured 10.6 s. Every 200
    // above already says each request got its turn within `wait` (10 s) of arriving.
    expect(tookMs).toBeGreaterThan(6_000);
    expect(tookMs).toBeLessThan(10_000 + 5_000);

    expect(during.rateLimit).toMatchObject({
      limit: { requests: PACED, perSeconds: 1, burst: 0, by: "upstream", scope: "local" },
      pause: null,
    });
    expect(during.rateLimit?.queued).toBeGreaterThan(40);
    expect(during.rateLimit?.nextTurnInSeconds).toBeGreaterThanOrEqual(0);

    // RateLimit fields (draft-ietf-httpapi-ratelimit-headers) on every relayed answer.
    for (const answer of results) {
      expect(answer.headers["ratelimit-policy"]).toBe('"default";q=16;w=1');
      expect(answer.headers.ratelimit).toMatch(/^"default";r=\d+;t=\d+$/);
    }

    const metrics = await metricsText(gateway.adminUrl);
    const waited = metricValue(metrics, "bearer_proxy_rate_limit_wait_seconds_count", {
      upstream: "reports",
    });
    expect(waited).toBeGreaterThanOrEqual(90);
    expect(metrics).toMatch(/^bearer_proxy_rate_limit_queue_depth\{upstream="reports"\} 0$/m);
    expect(metricValue(metrics, "bearer_proxy_rate_limited_total", { upstream: "reports" })).toBe(
      0,
    );
  }, 30_000);

  it("unpaced: the same burst gets most of its requests refused by the upstream", async () => {
    const results = await burst(`${gateway.url}/unpaced/`, 100);
    const stats = await unpaced.stats();
    const refused = results.filter((a) => a.status === 429).length;
    console.log(`unpaced burst: ${100 - refused}/100 ok, upstream answered ${stats.rejected} 429`);
    // The burst reaches the upstream over a second or so (new connections): well over half fail.
    expect(refused).toBeGreaterThan(50);
    expect(refused).toBe(stats.rejected);
    // The upstream's Retry-After paused its traffic (counted; the 429s are relayed unchanged).
    const metrics = await metricsText(gateway.adminUrl);
    expect(
      metricValue(metrics, "bearer_proxy_rate_limited_total", {
        upstream: "unpaced",
        reason: "upstream_429",
      }),
    ).toBeGreaterThan(0);
  }, 30_000);

  it("wait 0: a request whose turn is not now is answered 429 rate_limited at once", async () => {
    const results = await burst(`${gateway.url}/strict/`, 5);
    const ok = results.filter((a) => a.status === 200);
    const refused = results.filter((a) => a.status === 429);
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(4);
    // The next turn is one interval (10.2 s / 5 = 2.04 s) after the first request went, so a
    // refusal says 3 s if it reached the pacer within 40 ms of it, else 2 s: on a loaded
    // two-core machine the five arrive up to 130 ms apart (issue 32 read a 2). Whole seconds,
    // rounded up; RateLimit's t says the same. That the wait is honest is checked below.
    for (const answer of refused) {
      expect(answer.code).toBe("rate_limited");
      expect(["2", "3"]).toContain(answer.headers["retry-after"]);
      expect(answer.headers["ratelimit-policy"]).toBe('"default";q=5;w=10');
      expect(answer.headers.ratelimit).toBe(`"default";r=0;t=${answer.headers["retry-after"]}`);
      expect(JSON.parse(answer.text)).toMatchObject({
        error: { code: "rate_limited", upstream: "strict" },
      });
    }
    // Computed at admission: the window is full again 2.04 s later, rounded up.
    expect(ok[0]!.headers.ratelimit).toBe('"default";r=0;t=3');
    const again = await send(`${gateway.url}/strict/`);
    expect(again.status).toBe(429);
    const metrics = await metricsText(gateway.adminUrl);
    expect(
      metricValue(metrics, "bearer_proxy_rate_limited_total", {
        upstream: "strict",
        reason: "limit",
      }),
    ).toBe(5);
    // Honest: a client that waits as long as the last refusal said gets its turn.
    await sleep(Number(again.headers["retry-after"]) * 1_000);
    expect((await send(`${gateway.url}/strict/`)).status).toBe(200);
  });

  it("a client that hangs up while it waits leaves the queue; the upstream never sees it", async () => {
    expect((await send(`${gateway.url}/slow/`)).status).toBe(200);
    const before = (await paced.stats()).arrivals.length;
    const leaving = send(`${gateway.url}/slow/`, { signal: AbortSignal.timeout(300) });
    await expect(leaving).rejects.toThrow();
    await sleep(100);
    const status = await upstreamStatus(gateway.adminUrl, "slow");
    expect(status.rateLimit?.queued).toBe(0);
    expect((await paced.stats()).arrivals.length).toBe(before);
    // Its turn was given back: the next request waits out the first's 3 s, not 6.
    const next = await send(`${gateway.url}/slow/`);
    expect(next.status).toBe(200);
    expect(next.ms).toBeLessThan(4_500);
  }, 30_000);
});
