import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  adminText,
  basicHeader,
  emulatorUpstream,
  errorCode,
  htpasswdFile,
  httpGet,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";

/**
 * Issue 30: the failure table was one LRU of 10,000 addresses, so 10,050 failed credentials from
 * other addresses evicted a blocked address and unblocked it. Blocks now live in a table of their
 * own that churn cannot reach: after failures from 10,050 other addresses (each a new entry in
 * the table of counts), the blocked address is still refused, even with the right password.
 *
 * The throttle's clock stands still during the churn: on a loaded machine 10,050 connections may
 * take longer than the block's minute, and the block ending on time is not what is tested here.
 */

const CRON = { user: "reporting-cron", password: "cron-Pw9xQ" };
const GUESSER = "127.0.0.9";
const OTHERS = 10_050;

describe("a blocked address survives churn of other addresses", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let billing: string;
  /** performance.now, or the moment it was held at. */
  let heldAt: number | undefined;
  const throttleClock = () => heldAt ?? performance.now();

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    gateway = await startAppUnderTest({
      throttleClock,
      caPem: pki.caPem,
      files: { "callers.htpasswd": htpasswdFile({ [CRON.user]: CRON.password }) },
      config: {
        callers: { basic: { usersFile: "callers.htpasswd" } },
        upstreams: [emulatorUpstream(emulator.url, "billing", { allow: [{ user: CRON.user }] })],
      },
    });
    billing = `${gateway.url}/billing/echo`;
  });
  afterAll(async () => {
    await gateway?.close();
    await emulator?.close();
  });

  const get = (from: string, header: string) =>
    httpGet(billing, { localAddress: from, headers: { "proxy-authorization": header } });

  it(`still refuses the guesser after failures from ${OTHERS} other addresses`, async () => {
    for (let i = 0; i < 10; i++) {
      expect((await get(GUESSER, basicHeader(CRON.user, `guess-${i}`))).status).toBe(407);
    }
    expect((await get(GUESSER, basicHeader(CRON.user, CRON.password))).status).toBe(429);
    heldAt = performance.now();

    // A cheap failure (no bcrypt: the credential is not base64) from each of 10,050 addresses
    // in 127.1.0.0/16, 32 connections at a time.
    const statuses = new Map<number, number>();
    let next = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < OTHERS) {
          const i = next++;
          const answer = await get(`127.1.${i >> 8}.${i & 255}`, "Basic not*base64");
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        }
      }),
    );
    expect(Object.fromEntries(statuses)).toEqual({ 407: OTHERS });

    const after = await get(GUESSER, basicHeader(CRON.user, CRON.password));
    expect(after.status).toBe(429);
    expect(errorCode(after.text)).toBe("caller_throttled");
    expect(Number(after.headers["retry-after"])).toBeGreaterThan(0);
    expect(Number(after.headers["retry-after"])).toBeLessThanOrEqual(60);

    const status = JSON.parse(await adminText(gateway.adminUrl, "/status?format=json")) as {
      callers?: { blockedAddresses: number };
    };
    expect(status.callers?.blockedAddresses).toBe(1);
    heldAt = undefined;
  }, 300_000);
});
