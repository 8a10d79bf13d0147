import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, logsMatching } from "../helpers/app-under-test.js";
import { basicHeader } from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { sleep } from "../helpers/wait.js";
import { ALICE, BOB, startByCallerGateway } from "../pacing/support/by-caller-gateway.js";
import {
  type Answer,
  burst,
  type SendOptions,
  send,
  upstreamStatus,
} from "../pacing/support/gateway.js";
import {
  startUpstreamProcess,
  type UpstreamProcess,
} from "../pacing/support/limited-upstream-process.js";

/**
 * Issue 26, done-when 2: with `rateLimit.by: caller` each caller has its own budget, so a heavy
 * caller's burst queues behind its own limit while a light caller of the same upstream (same
 * client id, same quota upstream) goes at once. Callers are who an `allow` list identified
 * (htpasswd users here, both from 127.0.0.1), else the peer address (127.0.0.1 and 127.0.0.2),
 * which the proxy says at start.
 */

describe("rateLimit.by: caller", () => {
  let emulator: Emulator;
  let upstream: UpstreamProcess;
  let gateway: AppUnderTest;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    // Plenty for both callers: this file is about who waits, not the upstream's limit.
    upstream = await startUpstreamProcess({ cert: pki.good, limit: 1_000 });
    gateway = await startByCallerGateway({
      caPem: pki.caPem,
      emulator,
      origin: upstream.origin,
      perCaller: { requests: 5, per: "1s", by: "caller", wait: "30s" },
    });
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([upstream?.close(), emulator?.close()]);
  });

  /**
   * A heavy caller fires 30 requests at once (6 s of its budget) while a light one sends one
   * request every 400 ms (under its budget); returns both sides' latencies.
   */
  async function heavyAndLight(path: string, heavy: SendOptions, light: SendOptions) {
    // Prime each caller once (token, credential check) so latencies are about pacing alone.
    await send(`${gateway.url}${path}`, heavy);
    await send(`${gateway.url}${path}`, light);
    await sleep(1_100);
    const heavyAnswers = burst(`${gateway.url}${path}`, 30, heavy);
    await sleep(300);
    const lightAnswers: Answer[] = [];
    for (let i = 0; i < 4; i++) {
      lightAnswers.push(await send(`${gateway.url}${path}`, light));
      await sleep(400);
    }
    return { heavy: await heavyAnswers, light: lightAnswers };
  }

  function report(label: string, heavy: Answer[], light: Answer[]) {
    const heavyMs = heavy.map((a) => a.ms).sort((a, b) => a - b);
    const lightMs = light.map((a) => Math.round(a.ms));
    console.log(
      `${label}: heavy p50 ${Math.round(heavyMs[15]!)} ms, max ${Math.round(heavyMs.at(-1)!)} ms; light ${lightMs.join(", ")} ms`,
    );
  }

  it("by peer address: the light caller goes at once while the heavy one queues", async () => {
    const { heavy, light } = await heavyAndLight(
      "/by-address/",
      { localAddress: "127.0.0.1" },
      { localAddress: "127.0.0.2" },
    );
    report("by address", heavy, light);
    expect(heavy.map((a) => a.status)).toEqual(Array(30).fill(200));
    expect(light.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    // 30 at 5 per second: the last heavy request waits about 6 s.
    expect(Math.max(...heavy.map((a) => a.ms))).toBeGreaterThan(5_000);
    for (const answer of light) expect(answer.ms).toBeLessThan(1_000);
    // Each light request had its budget's whole allowance: nothing to wait for.
    for (const answer of light) expect(answer.headers.ratelimit).toBe('"default";r=0;t=1');
  }, 30_000);

  it("says at start that an upstream whose rules name no callers counts by peer address", () => {
    const lines = logsMatching(gateway.records, "rateLimit.by is caller");
    expect(lines.map((line) => line.upstream)).toEqual(["by-address"]);
    expect(lines[0]?.level).toBe("info");
  });

  it("by identified caller: two users from one address have a budget each", async () => {
    const { heavy, light } = await heavyAndLight(
      "/by-user/",
      { headers: { "proxy-authorization": basicHeader(ALICE.user, ALICE.password) } },
      { headers: { "proxy-authorization": basicHeader(BOB.user, BOB.password) } },
    );
    report("by user", heavy, light);
    expect(heavy.map((a) => a.status)).toEqual(Array(30).fill(200));
    expect(light.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(Math.max(...heavy.map((a) => a.ms))).toBeGreaterThan(5_000);
    for (const answer of light) expect(answer.ms).toBeLessThan(1_000);
  }, 30_000);

  it("shows the budgets on /status", async () => {
    const status = await upstreamStatus(gateway.adminUrl, "by-user");
    expect(status.rateLimit).toMatchObject({
      limit: { requests: 5, perSeconds: 1, by: "caller", scope: "local", waitSeconds: 30 },
      queued: 0,
      pause: null,
    });
    expect(status.rateLimit?.budgets).toBeGreaterThanOrEqual(2);
  });
});
