import type { IncomingMessage, ServerResponse } from "node:http";
import { Agent } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import {
  closedPort,
  defaultRoutes,
  type FakeUpstream,
  startFakeUpstream,
} from "../helpers/fake-upstreams.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { sleep, waitFor } from "../helpers/wait.js";
import { type RacyUpstream, startRacyUpstream } from "./support/racy-upstream.js";
import { type Answer, errorBody, loadUntil, openFds, runLoad, send } from "./support/traffic.js";

/**
 * Issue 9, "upstream trouble", through the whole app with real tokens from the emulator: every
 * way an upstream can fail gets its documented error (or succeeds, where the proxy can recover
 * on its own), a healthy upstream on another route keeps answering throughout, and a burst of
 * failures leaks no sockets or file descriptors.
 */

const TIMEOUTS = { connect: "1s", responseHeaders: "500ms", bodyIdle: "300ms" };

let pki: TestPki;
let emulator: Emulator;
let badCa: FakeUpstream;
let wrongHost: FakeUpstream;
let expired: FakeUpstream;
let flaky: FakeUpstream;
let closer: FakeUpstream;
let racy: RacyUpstream;
let stale: RacyUpstream;
let refusedPort: number;

/** Answers like the default routes, but asks to close the connection after every response. */
function closeAfterEveryResponse(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader("connection", "close");
  defaultRoutes(req, res);
}

beforeAll(async () => {
  pki = await createTestPki();
  emulator = await startTlsEmulator(pki);
  [badCa, wrongHost, expired, flaky, closer, racy, stale] = await Promise.all([
    startFakeUpstream({ cert: pki.otherCa }),
    startFakeUpstream({ cert: pki.wrongHost }),
    startFakeUpstream({ cert: pki.expired }),
    startFakeUpstream({ cert: pki.good }),
    startFakeUpstream({ cert: pki.good, handler: closeAfterEveryResponse }),
    startRacyUpstream({ cert: pki.good, idleCloseMs: [5, 40], finInFlightMs: 80 }),
    startRacyUpstream({
      cert: pki.good,
      idleCloseMs: [200, 200],
      finInFlightMs: 2_000,
      responseDelayMs: 100,
    }),
  ]);
  refusedPort = await closedPort();
});
afterAll(async () => {
  await Promise.all([badCa, wrongHost, expired, flaky, closer, racy, stale].map((u) => u?.close()));
  await emulator?.close();
});

/** The app: one healthy route to the emulator, one route per kind of trouble; tokens are real. */
function startApp(): Promise<AppUnderTest> {
  const tokenUrl = `${emulator.url}/iam/v1/oauth2/token`;
  const route = (name: string, baseUrl: string) => ({
    name,
    baseUrl,
    tokenUrl,
    clientId: "demo-client",
    clientSecret: "demo-secret",
    match: { pathPrefix: `/${name}/` },
    stripPrefix: true,
    timeouts: TIMEOUTS,
    token: { waitTimeout: "2s" },
  });
  return startAppUnderTest({
    caPem: pki.caPem,
    closeTimeoutMs: 500,
    config: {
      upstreams: [
        route("healthy", emulator.url),
        route("refused", `https://127.0.0.1:${refusedPort}`),
        route("bad-ca", badCa.origin),
        route("wrong-host", wrongHost.origin),
        route("expired", expired.origin),
        route("flaky", flaky.origin),
        route("closer", closer.origin),
        route("racy", racy.origin),
        route("stale", stale.origin),
      ],
    },
  });
}

function expectError(answer: Answer, status: number, code: string, upstream: string): void {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.code).toBe(code);
  expect(errorBody(answer)).toMatchObject({ code, upstream });
  expect(answer.text).not.toMatch(/\n\s+at |Bearer /);
}

/** The request log line of the last request to `path`. */
function requestLog(aut: AppUnderTest, path: string): Record<string, unknown> | undefined {
  return aut.records.filter((r) => r.msg === "request" && r.path === path).at(-1);
}

describe("upstream trouble, whole app", () => {
  let aut: AppUnderTest;
  let agent: Agent;

  beforeAll(async () => {
    aut = await startApp();
    agent = new Agent({ connections: 16 });
    await waitFor(
      () => aut.app.tokens.statuses().get("healthy")?.state === "valid",
      "the first token",
    );
  });
  afterAll(async () => {
    await agent?.close();
    await aut?.close();
  });

  const get = (path: string) => send(`${aut.url}${path}`, { dispatcher: agent });

  async function expectHealthy(): Promise<void> {
    const answer = await get("/healthy/echo/still-here");
    expect(answer.status).toBe(200);
    expect((JSON.parse(answer.text) as { url: string }).url).toBe("/echo/still-here");
  }

  it("connection refused → 502 upstream_unreachable", async () => {
    expectError(await get("/refused/x"), 502, "upstream_unreachable", "refused");
    await expectHealthy();
  });

  it.each([
    ["a certificate from a CA we don't trust", "bad-ca", () => badCa],
    ["a certificate for another host name", "wrong-host", () => wrongHost],
    ["an expired certificate", "expired", () => expired],
  ])(
    "%s → 502 upstream_tls_error, not one byte of the request sent",
    async (_name, route, target) => {
      expectError(await get(`/${route}/echo/secret-path`), 502, "upstream_tls_error", route);
      expect(target().connections()).toBeGreaterThan(0);
      expect(target().requests).toEqual([]);
      await expectHealthy();
    },
  );

  it("reset before the response → retried once (GET), then 502 upstream_reset", async () => {
    const before = flaky.requests.length;
    expectError(await get("/flaky/reset-before-response"), 502, "upstream_reset", "flaky");
    expect(flaky.requests.length - before).toBe(2);
    await expectHealthy();
  });

  it.each([
    ["reset during the response body", "/flaky/reset-mid-body", "upstream_reset"],
    ["a body that stalls (bodyIdle 300 ms)", "/flaky/stall-body", "upstream_timeout"],
  ])(
    "%s (%s) → the client's response is cut short, the error logged, others unaffected",
    async (_name, path, code) => {
      // Healthy traffic runs while the broken response is in progress.
      const [broken, healthy] = await Promise.all([
        get(path),
        runLoad({
          urls: [`${aut.url}/healthy/echo/during`],
          concurrency: 2,
          dispatcher: agent,
          durationMs: 500,
        }),
      ]);
      // Status 200 was already sent: the only honest signal left is a truncated body.
      expect(broken.status).toBe(0);
      expect(broken.code).toMatch(/^transport:/);
      // How many healthy requests fit in 500 ms is the machine's business (CI once got 3 with
      // four test files on two cores); that every one of them succeeded is the proxy's. The
      // count only keeps `every` from passing on nothing: each worker sends at least one.
      expect(healthy.length).toBeGreaterThanOrEqual(2);
      expect(healthy.every((a) => a.status === 200)).toBe(true);
      await waitFor(() => requestLog(aut, path) !== undefined, "the request log line");
      expect(requestLog(aut, path)).toMatchObject({
        upstream: "flaky",
        status: 200,
        errorCode: code,
      });
      await expectHealthy();
    },
  );

  it("response headers too slow → 504 upstream_timeout", async () => {
    expectError(await get("/flaky/slow-headers/3000"), 504, "upstream_timeout", "flaky");
    await expectHealthy();
  });

  it("an upstream that sends Connection: close every time: all succeed, nothing reused, the client keeps its connection", async () => {
    let proxyConnections = 0;
    const countConnection = () => proxyConnections++;
    const server = aut.app.proxies[0]!.server;
    server.on("connection", countConnection);
    const single = new Agent({ connections: 1 });
    try {
      const connectionsBefore = closer.connections();
      const answers: Answer[] = [];
      for (let i = 0; i < 20; i++)
        answers.push(await send(`${aut.url}/closer/echo/${i}`, { dispatcher: single }));
      expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
      // Hop-by-hop: the upstream's Connection: close concerns the upstream hop only.
      expect(answers.every((a) => a.headers.connection !== "close")).toBe(true);
      expect(closer.connections() - connectionsBefore).toBe(20);
      expect(proxyConnections).toBe(1);
      await waitFor(() => closer.openSockets() === 0, "the upstream sockets to close");
    } finally {
      server.off("connection", countConnection);
      await single.close();
    }
    await expectHealthy();
  });

  it("an upstream that silently closes idle keep-alive connections, under load: only documented outcomes", async () => {
    const lostBefore = racy.racesLost();
    const racesLost = () => racy.racesLost() - lostBefore;
    // Load in 1-second rounds until enough requests crossed the upstream's FIN, at most 15 s:
    // how many requests fit in a second is the machine's business (CI saw ~330 ms a request in
    // this file, 3 a worker a second, against the 30 the old single round needed); that the
    // race happens and every outcome is documented is the proxy's. Races that never happen
    // still fail, after the cap.
    const answers = await loadUntil(
      () =>
        runLoad({
          urls: [`${aut.url}/racy/a`, `${aut.url}/racy/b`],
          concurrency: 4,
          dispatcher: agent,
          durationMs: 1_000,
          pauseMs: 8,
        }),
      (sofar) => racesLost() > 3 && sofar.length > 30,
      15_000,
    );
    // The race really happened: requests crossed the upstream's FIN on pooled connections.
    expect(racesLost()).toBeGreaterThan(3);
    expect(answers.length).toBeGreaterThan(30);
    // Each GET lost to the race is retried once; a retry that lands on another stale pooled
    // connection gets the documented 502 upstream_reset (see the next test for that case).
    for (const answer of answers) {
      if (answer.status !== 200) expectError(answer, 502, "upstream_reset", "racy");
    }
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(answers.length * 0.8);
    await expectHealthy();
  });

  it("after a lull every pooled connection is stale: a GET still succeeds (retried on a fresh connection)", async () => {
    // Four connections in the pool (the upstream answers after 100 ms, so four concurrent
    // requests need four), then silence until the upstream has closed all four (200 ms idle),
    // their FINs still in flight when the next request comes (the classic "502 after idle").
    const primed = await Promise.all(
      [0, 1, 2, 3].map(() => send(`${aut.url}/stale/prime`, { dispatcher: agent })),
    );
    expect(primed.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(stale.connections()).toBe(4);
    await waitFor(() => stale.idleCloses() === 4, "the upstream to close all four while idle");
    const answer = await get("/stale/after-lull");
    expect(stale.racesLost()).toBeGreaterThanOrEqual(1);
    expect(`${answer.status} ${answer.code ?? ""}`).toBe("200 ");
  });

  it("POSTs to that upstream are never retried: each succeeds or gets 502 upstream_reset", async () => {
    const answers: Answer[] = [];
    const deadline = Date.now() + 1_000;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (Date.now() < deadline) {
          answers.push(
            await send(`${aut.url}/racy/post`, { method: "POST", body: "x", dispatcher: agent }),
          );
          await sleep(Math.random() * 15);
        }
      }),
    );
    for (const answer of answers) {
      if (answer.status !== 200) expectError(answer, 502, "upstream_reset", "racy");
    }
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(answers.length / 2);
    await expectHealthy();
  });
});

describe("no leaks", () => {
  it("a burst of failing requests leaves no socket or file descriptor behind once the app is closed", async () => {
    const urls = (base: string) => [
      `${base}/refused/x`,
      `${base}/bad-ca/x`,
      `${base}/wrong-host/x`,
      `${base}/expired/x`,
      `${base}/flaky/reset-before-response`,
      `${base}/flaky/reset-mid-body`,
      `${base}/flaky/stall-body`,
      `${base}/closer/echo/x`,
      `${base}/racy/x`,
      `${base}/healthy/echo/x`,
    ];
    await sleep(200);
    const baseline = openFds();
    const aut = await startApp();
    const agent = new Agent({ connections: 32 });
    const burst = () =>
      runLoad({ urls: urls(aut.url), concurrency: 22, dispatcher: agent, durationMs: 600 });
    try {
      await waitFor(
        () => aut.app.tokens.statuses().get("healthy")?.state === "valid",
        "the first token",
      );
      const first = await burst();
      expect(first.filter((a) => a.status !== 200).length).toBeGreaterThanOrEqual(16);
      // Connections answered before their body was read linger up to 2 s idle (lingering-close.ts).
      await sleep(2_500);
      const afterFirst = openFds();
      const second = await burst();
      await waitFor(
        () => openFds() - afterFirst <= 10,
        "descriptors back to their level",
        12_000,
      ).catch(() => {});
      const afterSecond = openFds();
      // Another burst of the same failures: nothing accumulates while the app runs. (Pooled
      // keep-alive connections, both halves in this process, vary by a few; a leak of one fd
      // per failed request would add 16 or more.)
      expect(second.filter((a) => a.status !== 200).length).toBeGreaterThanOrEqual(16);
      expect(afterSecond - afterFirst).toBeLessThanOrEqual(10);
    } finally {
      await agent.close();
      await aut.close();
    }
    for (const upstream of [badCa, wrongHost, expired, flaky, closer]) {
      await waitFor(() => upstream.openSockets() === 0, "the fake upstreams' sockets to close");
    }
    await waitFor(() => racy.openSockets() === 0, "the racy upstream's sockets to close");
    // Back to where we started. Slack of 2: the emulator's server-side halves of the proxy's
    // token/API connections close when the emulator sees the FIN, a moment after app.close().
    await waitFor(
      () => openFds() <= baseline + 2,
      `fds back to baseline ${baseline} (now ${openFds()})`,
      5_000,
    );
  });
});
