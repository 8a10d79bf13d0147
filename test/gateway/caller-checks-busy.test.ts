import bcrypt from "bcryptjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CallersStatus } from "../../src/callers/caller-types.js";
import type { Denial } from "../../src/callers/denial-log.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  adminText,
  basicHeader,
  callerDenialCounts,
  emulatorUpstream,
  errorCode,
  type HttpAnswer,
  httpGet,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";

/**
 * Issue 30: at most `callers.basic.maxConcurrentChecks` password checks run at once in the
 * process and at most `maxQueuedChecks` wait; beyond, 503 `caller_checks_busy` with
 * `Retry-After: 1` at once — no check, no challenge, and no failure counted against the address
 * (the password may well be right). /metrics and /status show the refusals by code.
 *
 * Twelve wrong passwords arrive at once from one address; the user's hash has cost 12 (~300 ms a
 * check here), so the first check is still running when the other eleven arrive. Counted as
 * failures, the twelve would block the address; as it is, only the three checked ones count.
 */

const CRON = { user: "reporting-cron", password: "cron-Pw9xQ" };
const FLOOD = 12;
const FROM = "127.0.0.40";

describe("a full password check queue answers 503 caller_checks_busy", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let billing: string;
  const answers: HttpAnswer[] = [];

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      files: { "callers.htpasswd": `${CRON.user}:${bcrypt.hashSync(CRON.password, 12)}\n` },
      config: {
        callers: {
          basic: { usersFile: "callers.htpasswd", maxConcurrentChecks: 1, maxQueuedChecks: 2 },
        },
        upstreams: [emulatorUpstream(emulator.url, "billing", { allow: [{ user: CRON.user }] })],
      },
    });
    billing = `${gateway.url}/billing/echo`;
  }, 30_000);
  afterAll(async () => {
    await gateway?.close();
    await emulator?.close();
  });

  it("one check runs, two wait, the other nine are refused at once", async () => {
    const results = await Promise.all(
      Array.from({ length: FLOOD }, (_, i) =>
        httpGet(billing, {
          localAddress: FROM,
          headers: { "proxy-authorization": basicHeader(CRON.user, `guess-${i}`) },
        }),
      ),
    );
    answers.push(...results);
    const checked = results.filter((a) => a.status === 407);
    const busy = results.filter((a) => a.status === 503);
    expect(results.filter((a) => a.status === 429)).toEqual([]);
    expect(checked.length).toBe(3);
    expect(busy.length).toBe(FLOOD - 3);
    for (const answer of busy) {
      expect(errorCode(answer.text)).toBe("caller_checks_busy");
      expect(answer.headers["retry-after"]).toBe("1");
      expect(answer.headers["bearer-proxy-error"]).toBe("caller_checks_busy");
      expect(answer.headers["proxy-authenticate"]).toBeUndefined();
    }
    const metrics = await adminText(gateway.adminUrl, "/metrics");
    expect(metrics).toMatch(/^bearer_proxy_caller_password_checks_total 3$/m);
    expect(metrics).toMatch(/^bearer_proxy_caller_password_checks_waiting 0$/m);
    expect(callerDenialCounts(metrics)).toEqual({
      "billing/invalid_credential": 3,
      "billing/checks_busy": FLOOD - 3,
    });
  });

  it("/status shows the refusals by code and the check queue's limits", async () => {
    const status = JSON.parse(await adminText(gateway.adminUrl, "/status?format=json")) as {
      upstreams: { name: string; requests: { errorsByCode: Record<string, number> } }[];
      callerDenials: Denial[];
      callers: CallersStatus;
    };
    const billingReport = status.upstreams.find((u) => u.name === "billing");
    expect(billingReport?.requests.errorsByCode).toMatchObject({
      caller_checks_busy: FLOOD - 3,
      caller_unauthenticated: 3,
    });
    expect(status.callerDenials.filter((d) => d.reason === "checks_busy")).toHaveLength(FLOOD - 3);
    expect(status.callers.passwordChecks).toEqual({
      running: 0,
      queued: 0,
      maxConcurrent: 1,
      maxQueued: 2,
      started: 3,
      runsOn: "thread-pool",
    });
    expect(status.callers.usersFile).toMatchObject({ users: 1, stale: false });
  });

  it("a refusal for want of a slot is not a failed guess: the address is not blocked", async () => {
    const right = await httpGet(billing, {
      localAddress: FROM,
      headers: { "proxy-authorization": basicHeader(CRON.user, CRON.password) },
    });
    expect(right.status).toBe(200);
  });
});
