import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { createTestPki } from "../helpers/tls.js";
import { sleep, waitFor } from "../helpers/wait.js";
import { burst, send, upstreamEntry, upstreamStatus } from "../pacing/support/gateway.js";

/**
 * Issue 26 and the reload rule (Caddy's Load): a reload that leaves an upstream's pacing alone
 * keeps its pacer — requests waiting for their turn keep their place, and the limit holds across
 * the swap; a reload that changes `rateLimit` paces by the new one from then on.
 */

describe("pacing across a config reload", () => {
  let emulator: Emulator;
  let upstream: FakeUpstream;
  let gateway: AppUnderTest;
  let document: (requests: number, extra?: Record<string, unknown>[]) => Record<string, unknown>;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    upstream = await startFakeUpstream({ cert: pki.good });
    document = (requests, extra = []) => ({
      upstreams: [
        upstreamEntry("reports", upstream.origin, emulator, {
          rateLimit: { requests, per: "1s", wait: "20s" },
        }),
        ...extra,
      ],
    });
    gateway = await startAppUnderTest({ caPem: pki.caPem, config: document(1) });
    expect((await send(`${gateway.url}/reports/echo`)).status).toBe(200);
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([upstream?.close(), emulator?.close()]);
  });

  const reload = async (doc: Record<string, unknown>) => {
    expect(await gateway.app.reload(await gateway.load(doc))).toEqual({ outcome: "applied" });
  };

  it("an unchanged upstream keeps its queue and its pace through a reload", async () => {
    // The warm-up request's turn (1.02 s apart at 1 per second) is over: the burst starts fresh.
    await sleep(1_100);
    const before = upstream.requests.length;
    // 8 at 1 per second, turns 1.02 s apart (the pacer's 2% margin): the first goes at once, the
    // 8th 7.14 s later; the reload comes while most of them wait (5 or more until 3.06 s).
    const burstAtMs = performance.now();
    const answers = burst(`${gateway.url}/reports/echo`, 8);
    await waitFor(
      async () =>
        ((await upstreamStatus(gateway.adminUrl, "reports")).rateLimit?.queued as number) >= 5,
      "requests waiting for their turn",
    );
    await reload(
      document(1, [
        upstreamEntry("files", upstream.origin, emulator, { match: { pathPrefix: "/files/" } }),
      ]),
    );
    const status = await upstreamStatus(gateway.adminUrl, "reports");
    const reloadedInMs = performance.now() - burstAtMs;
    // At least 4 wait until 4.08 s into the burst; a fresh pacer would show none.
    expect(
      status.rateLimit?.queued,
      `read ${Math.round(reloadedInMs)} ms in`,
    ).toBeGreaterThanOrEqual(4);
    // A request after the reload queues behind those already waiting (one budget): its turn is
    // the 9th, 8 × 1.02 s after the first, which went no sooner than the burst was sent. A fresh
    // pacer would send it at once, ahead of those still waiting.
    const late = await send(`${gateway.url}/reports/echo/late`);
    const lateDoneMs = performance.now() - burstAtMs;
    const results = await answers;
    expect(results.map((a) => a.status)).toEqual(Array(8).fill(200));
    expect(late.status).toBe(200);
    const arrived = upstream.requests.slice(before).map((r) => r.url);
    expect(arrived).toEqual([...Array(8).fill("/echo"), "/echo/late"]);
    expect(lateDoneMs).toBeGreaterThan(8_000);
    console.log(
      `reload read ${Math.round(reloadedInMs)} ms into the burst; the late request sent ${Math.round(lateDoneMs - late.ms)} ms in, answered ${Math.round(lateDoneMs)} ms in`,
    );
  }, 30_000);

  it("a changed rateLimit paces by the new limit", async () => {
    await reload(document(50));
    const status = await upstreamStatus(gateway.adminUrl, "reports");
    expect(status.rateLimit).toMatchObject({ limit: { requests: 50 } });
    const answers = await burst(`${gateway.url}/reports/echo`, 5);
    expect(answers.map((a) => a.status)).toEqual(Array(5).fill(200));
    expect(answers[0]?.headers["ratelimit-policy"]).toBe('"default";q=50;w=1');
  }, 30_000);
});
