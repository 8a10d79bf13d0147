import { setMaxListeners } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { createTestPki } from "../helpers/tls.js";
import { sleep, waitFor } from "../helpers/wait.js";
import {
  type Answer,
  burst,
  metricsText,
  metricValue,
  send,
  upstreamEntry,
} from "../pacing/support/gateway.js";

/**
 * Issue 30 item 3, "parked requests take the replica down": requests waiting for a pacing turn
 * counted in `limits.maxInFlight`, so a few addresses parking thousands of requests on one
 * rate-limited route made every other upstream answer 503 `overloaded` and /readyz fail.
 *
 * Now a waiting request is out of `maxInFlight` and holds a place in the waiting room instead,
 * bounded by `limits.maxWaiting` and `limits.maxWaitingPerCaller` (the caller here: the peer
 * address, 127.0.0.2–6); beyond either the answer is 429 `rate_limited` at once. 2,000 requests
 * park on one route, ten times `maxInFlight`, while a second upstream keeps answering 200 and
 * /readyz stays ready; a client that hangs up gives its place back.
 *
 * The limited route allows one request per 30 minutes per caller and lets requests wait for
 * days: after each address's first request, every request parks (600 turns: 300 h), and none
 * gets a turn during the test, so the counts are exact whatever the machine's load.
 */

const MAX_IN_FLIGHT = 200;
const MAX_WAITING = 2_000;
const MAX_WAITING_PER_CALLER = 600;

/** Requests sent and not answered: `hangUp` aborts them all. */
interface Parked {
  answers: Promise<PromiseSettledResult<Answer>[]>;
  hangUp(): void;
}

function park(url: string, count: number, localAddress: string): Parked {
  const controller = new AbortController();
  // One signal for hundreds of requests: each adds a listener.
  setMaxListeners(0, controller.signal);
  const sending = Array.from({ length: count }, () =>
    send(url, { localAddress, signal: controller.signal }),
  );
  return { answers: Promise.allSettled(sending), hangUp: () => controller.abort() };
}

async function waitingStatus(adminUrl: string): Promise<Record<string, unknown>> {
  const answer = await send(`${adminUrl}/status?limit=1`, {
    headers: { accept: "application/json" },
  });
  return (JSON.parse(answer.text) as { waiting: Record<string, unknown> }).waiting;
}

async function waitingCount(adminUrl: string): Promise<number> {
  return (await waitingStatus(adminUrl)).requests as number;
}

describe("thousands of parked requests beside a healthy upstream", () => {
  let emulator: Emulator;
  let upstream: FakeUpstream;
  let gateway: AppUnderTest;
  const parked: Parked[] = [];

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    upstream = await startFakeUpstream({ cert: pki.good });
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        limits: {
          maxInFlight: MAX_IN_FLIGHT,
          maxWaiting: MAX_WAITING,
          maxWaitingPerCaller: MAX_WAITING_PER_CALLER,
        },
        upstreams: [
          upstreamEntry("limited", upstream.origin, emulator, {
            rateLimit: { requests: 1, per: "30m", by: "caller", wait: "500h" },
          }),
          upstreamEntry("healthy", upstream.origin, emulator),
        ],
      },
    });
    // Tokens fetched; each address spends its one turn of the hour.
    expect((await send(`${gateway.url}/healthy/echo`)).status).toBe(200);
    for (let i = 2; i <= 6; i++) {
      const first = await send(`${gateway.url}/limited/echo`, { localAddress: `127.0.0.${i}` });
      expect(first.status, first.text).toBe(200);
    }
  }, 30_000);

  afterAll(async () => {
    for (const requests of parked) requests.hangUp();
    await Promise.all(parked.map((requests) => requests.answers));
    await gateway?.close();
    await Promise.all([upstream?.close(), emulator?.close()]);
  });

  it("one caller parks up to maxWaitingPerCaller; its next requests get 429 rate_limited at once", async () => {
    parked.push(park(`${gateway.url}/limited/echo`, MAX_WAITING_PER_CALLER, "127.0.0.2"));
    await waitFor(
      async () => (await waitingCount(gateway.adminUrl)) === MAX_WAITING_PER_CALLER,
      `${MAX_WAITING_PER_CALLER} parked requests`,
      60_000,
    );
    const refused = await burst(`${gateway.url}/limited/echo`, 5, { localAddress: "127.0.0.2" });
    for (const answer of refused) {
      expect(answer.status).toBe(429);
      expect(answer.code).toBe("rate_limited");
      expect(answer.text).toContain("limits.maxWaitingPerCaller (600)");
      expect(Number(answer.headers["retry-after"])).toBeGreaterThanOrEqual(1);
      // Answered, not parked: it never waited for a turn.
      expect(answer.ms).toBeLessThan(10_000);
    }
    // Another caller of the same route still gets a place.
    parked.push(park(`${gateway.url}/limited/echo`, 1, "127.0.0.3"));
    await waitFor(
      async () => (await waitingCount(gateway.adminUrl)) === MAX_WAITING_PER_CALLER + 1,
      "the other caller's request parked",
      10_000,
    );
  }, 90_000);

  it("2,000 parked requests (10× maxInFlight) leave the other upstream answering 200 and /readyz ready", async () => {
    parked.push(park(`${gateway.url}/limited/echo`, 499, "127.0.0.3"));
    parked.push(park(`${gateway.url}/limited/echo`, 500, "127.0.0.4"));
    parked.push(park(`${gateway.url}/limited/echo`, 400, "127.0.0.5"));
    await waitFor(
      async () => (await waitingCount(gateway.adminUrl)) === MAX_WAITING,
      `${MAX_WAITING} parked requests`,
      60_000,
    );
    // The process load holds none of them.
    expect(gateway.app.lifecycle.load.inFlight).toBeLessThan(10);

    const healthy = await burst(`${gateway.url}/healthy/echo`, 50);
    expect(healthy.map((a) => a.status)).toEqual(Array(50).fill(200));
    const ready = await send(`${gateway.adminUrl}/readyz`);
    expect(ready.status, ready.text).toBe(200);
    // More time, more requests: still healthy, still ready (sustained overload would show by now
    // on the old accounting, which refused every request over maxInFlight).
    for (let round = 0; round < 3; round++) {
      await sleep(300);
      expect((await send(`${gateway.url}/healthy/echo`)).status).toBe(200);
      expect((await send(`${gateway.adminUrl}/readyz`)).status).toBe(200);
    }

    const status = await waitingStatus(gateway.adminUrl);
    expect(status).toMatchObject({
      requests: MAX_WAITING,
      maxWaiting: MAX_WAITING,
      callers: 4,
      mostByOneCaller: MAX_WAITING_PER_CALLER,
      maxWaitingPerCaller: MAX_WAITING_PER_CALLER,
      refused: { maxWaiting: 0, maxWaitingPerCaller: 5 },
    });
    const metrics = await metricsText(gateway.adminUrl);
    expect(metricValue(metrics, "bearer_proxy_waiting_requests")).toBe(MAX_WAITING);
    expect(metricValue(metrics, "bearer_proxy_errors_total", { code: "overloaded" })).toBe(0);
  }, 90_000);

  it("past maxWaiting a request from a new caller gets 429 rate_limited at once", async () => {
    const refused = await burst(`${gateway.url}/limited/echo`, 5, { localAddress: "127.0.0.6" });
    for (const answer of refused) {
      expect(answer.status).toBe(429);
      expect(answer.code).toBe("rate_limited");
      expect(answer.text).toContain("limits.maxWaiting (2000)");
      expect(answer.ms).toBeLessThan(10_000);
    }
    // The healthy upstream is untouched by that too.
    expect((await send(`${gateway.url}/healthy/echo`)).status).toBe(200);
    const metrics = await metricsText(gateway.adminUrl);
    expect(
      metricValue(metrics, "bearer_proxy_rate_limited_total", {
        upstream: "limited",
        reason: "max_waiting",
      }),
    ).toBe(5);
    expect(
      metricValue(metrics, "bearer_proxy_rate_limited_total", {
        upstream: "limited",
        reason: "max_waiting_per_caller",
      }),
    ).toBe(5);
    expect(
      metricValue(metrics, "bearer_proxy_errors_total", {
        upstream: "limited",
        code: "rate_limited",
      }),
    ).toBe(10);
  }, 30_000);

  it("clients that hang up give their places back", async () => {
    for (const requests of parked) requests.hangUp();
    await waitFor(
      async () => (await waitingCount(gateway.adminUrl)) === 0,
      "every place given back",
      30_000,
    );
    const status = await waitingStatus(gateway.adminUrl);
    expect(status).toMatchObject({ requests: 0, callers: 0, mostByOneCaller: 0 });
    await waitFor(
      () => gateway.app.lifecycle.load.inFlight === 0,
      "nothing in flight any more",
      10_000,
    );
    // A new caller parks again.
    const again = park(`${gateway.url}/limited/echo`, 1, "127.0.0.6");
    parked.push(again);
    await waitFor(
      async () => (await waitingCount(gateway.adminUrl)) === 1,
      "a new request parked",
      10_000,
    );
  }, 60_000);
});

describe("a request that waited is admitted when its turn comes, even over maxInFlight", () => {
  let emulator: Emulator;
  let upstream: FakeUpstream;
  let gateway: AppUnderTest;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    upstream = await startFakeUpstream({ cert: pki.good });
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        limits: { maxInFlight: 2 },
        upstreams: [
          upstreamEntry("limited", upstream.origin, emulator, {
            rateLimit: { requests: 1, per: "4s", wait: "1m" },
          }),
          upstreamEntry("slow", upstream.origin, emulator),
        ],
      },
    });
    expect((await send(`${gateway.url}/slow/echo`)).status).toBe(200);
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([upstream?.close(), emulator?.close()]);
  });

  it("is counted again on its turn while a new request is refused 503 overloaded", async () => {
    expect((await send(`${gateway.url}/limited/echo`)).status).toBe(200);
    // Its turn is ~4 s away: it parks, out of maxInFlight.
    const waited = send(`${gateway.url}/limited/echo`);
    await waitFor(
      async () => (await waitingCount(gateway.adminUrl)) === 1,
      "the second request parked",
      5_000,
    );
    // Two slow requests fill maxInFlight while it waits; a third is refused.
    const slow = burst(`${gateway.url}/slow/slow-headers/7000`, 2);
    await waitFor(() => gateway.app.lifecycle.load.inFlight === 2, "maxInFlight full", 5_000);
    const refused = await send(`${gateway.url}/slow/echo`);
    expect(refused.status).toBe(503);
    expect(refused.code).toBe("overloaded");
    // Its turn comes with the process full: it already held a slot once, so it goes.
    const answer = await waited;
    expect(answer.status, answer.text).toBe(200);
    expect(answer.ms).toBeGreaterThan(2_500);
    expect((await slow).map((a) => a.status)).toEqual([200, 200]);
    await waitFor(() => gateway.app.lifecycle.load.inFlight === 0, "all done", 5_000);
  }, 30_000);
});
