import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { accessLines } from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import {
  metricsText,
  metricValue,
  upstreamEntry,
  upstreamStatus,
} from "../pacing/support/gateway.js";
import {
  closeAll,
  handshake,
  handshakes,
  type LimitedWsUpstream,
  startLimitedWsUpstream,
} from "../pacing/support/websocket.js";
import { startWsUpstream, type WsUpstream } from "../protocol/ws-upstream.js";

/**
 * Issue 26's left-out item: WebSocket handshakes are paced like any request. A handshake is a
 * request the upstream counts against its limit, so it takes a turn from the upstream's pacer
 * after its token and before it is sent: a burst of handshakes against a `ws` upstream that
 * allows 5 in any rolling second all open, evenly spaced, with no 429 from the upstream (the
 * same burst unpaced meets 429s); a `wait` too short for the excess answers it 429
 * `rate_limited` with Retry-After and the RateLimit fields, and the upstream never sees it; a
 * client that hangs up while it waits gives its turn back; the replay after an upstream 401
 * waits for a turn of its own.
 *
 * The proxy paces at 2 per second against the upstream's 5: the upstream runs in this process,
 * where a loaded machine delays its reads (each handshake opens a new TLS connection; at 3 per
 * second, four arrived within one second now and then), and handshakes that left the pacer
 * 510 ms apart must not be bunched into six in one second by that.
 */

const UPSTREAM_LIMIT = 5;
const PACED = 2;
const BURST = 8;

describe("WebSocket handshakes through the pacing gate", () => {
  let emulator: Emulator;
  let paced: LimitedWsUpstream;
  let unpaced: LimitedWsUpstream;
  let open: LimitedWsUpstream;
  let refusingFirst: WsUpstream;
  let gateway: AppUnderTest;
  const wsUrl = (path: string) => `${gateway.url.replace("http:", "ws:")}${path}`;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    [paced, unpaced, open] = await Promise.all([
      startLimitedWsUpstream({ cert: pki.good, limit: UPSTREAM_LIMIT }),
      startLimitedWsUpstream({ cert: pki.good, limit: UPSTREAM_LIMIT }),
      startLimitedWsUpstream({ cert: pki.good, limit: 1_000 }),
    ]);
    // Answers 401 to the first token it sees (and only that one), 101 to any other.
    let refusedToken: string | undefined;
    refusingFirst = await startWsUpstream({
      cert: pki.good,
      authorize: (req) => {
        refusedToken ??= req.headers.authorization;
        return req.headers.authorization === refusedToken ? 401 : true;
      },
    });
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        upstreams: [
          // First: the upstreams share one credential, whose token policy is the first's. A 401
          // may drop a token at any age, so the replay gets a new one at once.
          upstreamEntry("replay", refusingFirst.origin, emulator, {
            rateLimit: { requests: 1, per: "2s", wait: "5s" },
            token: { minAgeBeforeInvalidate: "0s" },
          }),
          upstreamEntry("paced", paced.origin, emulator, {
            rateLimit: { requests: PACED, per: "1s", wait: "10s" },
          }),
          upstreamEntry("unpaced", unpaced.origin, emulator),
          // One handshake every 5.1 s, none may wait that long: the rest of a burst is refused.
          upstreamEntry("strict", open.origin, emulator, {
            rateLimit: { requests: 2, per: "10s", wait: "1s" },
          }),
          // One every 5.1 s, a wait of 6 s: one handshake may wait, a second may not. Long, so
          // that a loaded machine has 4 s, not 1.5, to get the test's steps in before the
          // second's wait would fit (CI once took longer than 1.5 s with 2 s and 2.5 s).
          upstreamEntry("hangup", open.origin, emulator, {
            rateLimit: { requests: 1, per: "5s", wait: "6s" },
          }),
        ],
      },
    });
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([
      paced?.close(),
      unpaced?.close(),
      open?.close(),
      refusingFirst?.close(),
      emulator?.close(),
    ]);
  });

  it("paced: a burst all opens, evenly spaced, with no 429 from the upstream", async () => {
    const startMs = performance.now();
    const answers = await handshakes(wsUrl("/paced/chat"), BURST);
    const tookMs = performance.now() - startMs;
    closeAll(answers);
    const most = paced.maxInAnyWindow();
    console.log(
      `paced handshakes: ${answers.filter((a) => a.status === 101).length}/${BURST} opened in ${Math.round(tookMs)} ms; upstream: ${paced.accepted()} accepted, ${paced.rejected()} 429, at most ${most} in any second`,
    );
    expect(answers.map((a) => a.status)).toEqual(Array(BURST).fill(101));
    expect(paced.rejected()).toBe(0);
    expect(paced.accepted()).toBe(BURST);
    expect(most).toBeLessThanOrEqual(UPSTREAM_LIMIT);
    // Strictly even at 2 per 1.02 s: the last left the pacer 7 × 510 ms after the first.
    expect(tookMs).toBeGreaterThan((BURST - 1) * 510);
    // The 101 carries the RateLimit fields as any answer through a limited upstream does.
    for (const answer of answers) {
      expect(answer.headers["ratelimit-policy"]).toBe('"default";q=2;w=1');
      expect(answer.headers.ratelimit).toMatch(/^"default";r=\d+;t=\d+$/);
    }

    // Every handshake but the first waited: in the access line (written when the connection
    // closes) and in the wait histogram.
    await waitFor(() => pacedLines().length === BURST, "an access line for every paced connection");
    const waited = pacedLines().filter((line) => typeof line.waitMs === "number");
    expect(waited).toHaveLength(BURST - 1);
    // Turn k comes k × 510 ms after the first, so the waits add up to 510 × (1 + … + 7) less how
    // late each handshake reached the pacer. A loaded machine reads them late: in one CI run the
    // last arrived ~510 ms after the first, and a bound on its wait alone (> 6 × 510) failed. The
    // sum allows every handshake a second of lateness and still needs real waits of the pacer.
    const totalWaitMs = waited.reduce((sum, line) => sum + (line.waitMs as number), 0);
    expect(totalWaitMs).toBeGreaterThan((510 * (BURST - 1) * BURST) / 2 - (BURST - 1) * 1000);
    const metrics = await metricsText(gateway.adminUrl);
    expect(
      metricValue(metrics, "bearer_proxy_rate_limit_wait_seconds_count", { upstream: "paced" }),
    ).toBe(BURST - 1);
    expect(metricValue(metrics, "bearer_proxy_rate_limited_total", { upstream: "paced" })).toBe(0);
  }, 30_000);

  function pacedLines() {
    return accessLines(gateway.records).filter(
      (line) => line.upstream === "paced" && line.status === 101,
    );
  }

  it("unpaced: the same burst meets the upstream's 429s", async () => {
    const answers = await handshakes(wsUrl("/unpaced/chat"), BURST);
    closeAll(answers);
    const refused = answers.filter((a) => a.status === 429).length;
    console.log(
      `unpaced handshakes: ${BURST - refused}/${BURST} opened, upstream answered ${unpaced.rejected()} 429`,
    );
    expect(refused).toBeGreaterThan(0);
    expect(refused).toBe(unpaced.rejected());
  }, 30_000);

  it("wait too short: the excess is answered 429 rate_limited at once and never sent", async () => {
    const before = open.arrivals.length;
    const answers = await handshakes(wsUrl("/strict/chat"), 4);
    closeAll(answers);
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([101, 429, 429, 429]);
    expect(open.arrivals.length - before).toBe(1);
    for (const answer of answers.filter((a) => a.status === 429)) {
      expect(answer.headers["bearer-proxy-error"]).toBe("rate_limited");
      // The next turn is 5.1 s after the first handshake went, less the time since.
      const retryAfter = Number(answer.headers["retry-after"]);
      expect(retryAfter).toBeGreaterThanOrEqual(4);
      expect(retryAfter).toBeLessThanOrEqual(6);
      expect(answer.headers["ratelimit-policy"]).toBe('"default";q=2;w=10');
      expect(answer.headers.ratelimit).toBe(`"default";r=0;t=${retryAfter}`);
      expect(JSON.parse(answer.text)).toMatchObject({
        error: { code: "rate_limited", upstream: "strict" },
      });
    }
    const lines = accessLines(gateway.records).filter((line) => line.upstream === "strict");
    expect(lines.filter((line) => line.errorCode === "rate_limited")).toHaveLength(3);
    const metrics = await metricsText(gateway.adminUrl);
    expect(
      metricValue(metrics, "bearer_proxy_rate_limited_total", {
        upstream: "strict",
        reason: "limit",
      }),
    ).toBe(3);
  }, 30_000);

  it("a client that hangs up while it waits gives its turn back, unsent", async () => {
    const queued = async () => (await upstreamStatus(gateway.adminUrl, "hangup")).rateLimit?.queued;
    const before = open.arrivals.length;
    // The first takes the free turn; the second waits for the next, ~5 s away.
    const first = await handshake(wsUrl("/hangup/first"));
    expect(first.status).toBe(101);
    const leaving = new WebSocket(wsUrl("/hangup/leaving"));
    leaving.on("error", () => {});
    await waitFor(async () => (await queued()) === 1, "the second handshake waiting");
    leaving.terminate();
    // Well before its turn would have come (5 s): the hang-up ended the wait, not the turn.
    await waitFor(async () => (await queued()) === 0, "the wait ended by the hang-up", 3_000);

    // Its turn is free again: a new handshake gets it (within its 6 s wait), and one more
    // after that would wait ~10 s, too long, so it is refused at once.
    const taking = handshake(wsUrl("/hangup/taking"));
    await waitFor(async () => (await queued()) === 1, "the third handshake waiting");
    const tooLate = await handshake(wsUrl("/hangup/too-late"));
    const took = await taking;
    closeAll([first, took]);
    expect(took.status).toBe(101);
    expect(tooLate.status).toBe(429);
    expect(tooLate.headers["bearer-proxy-error"]).toBe("rate_limited");

    const sent = open.arrivals.length - before;
    expect(sent).toBe(2);
    const left = accessLines(gateway.records).find((line) => line.path === "/hangup/leaving");
    expect(left).toMatchObject({ status: 499, errorCode: "client_closed" });
  }, 30_000);

  it("the replay after an upstream 401 waits for its own turn", async () => {
    const answer = await handshake(wsUrl("/replay/chat"));
    closeAll([answer]);
    expect(answer.status).toBe(101);
    expect(refusingFirst.handshakes).toHaveLength(2);
    const line = () => accessLines(gateway.records).find((l) => l.path === "/replay/chat");
    await waitFor(() => line() !== undefined, "the replayed connection's access line");
    // The first handshake took the free turn; the replay, one more request the upstream
    // counts, waited for the next (2.04 s later, less the 401's round trip and the new token).
    expect(line()).toMatchObject({ status: 101, replayed: true, attempts: 2 });
    expect(line()?.waitMs).toBeGreaterThan(0);
  }, 30_000);
});
