import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CallersStatus } from "../../src/callers/caller-types.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, logsMatching, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  adminText,
  basicHeader,
  emulatorUpstream,
  htpasswdFile,
  httpGet,
  rewriteUsersFile,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";

/**
 * Issue 30, item 5: a users file truncated to 0 bytes (or left with comments only) was applied
 * live and every Basic caller got 407, while `validate` refused the same file at start. Now a
 * file that is empty, comment-only or unparsable is refused while running as at start: the last
 * good users stay in force, a warning is logged, /status shows the file as stale. A replacement
 * that defines at least one user applies at the next poll (about a second), and users it drops
 * lose access.
 *
 * Each check uses a credential not verified before, so the answer comes from the users in force,
 * not from the verified-credential cache.
 */

const CRON = { user: "reporting-cron", password: "cron-Pw9xQ" };
const ALICE = { user: "alice", password: "alice-pw" };
const USERS_FILE = "callers.htpasswd";
const REFUSED = "callers.basic users file changed but is invalid or defines no user";
/**
 * The users file is polled every second (DEFAULT_CALLERS_POLL_INTERVAL_MS), so a change is seen
 * in about 1 s. The bound leaves 4 s for a loaded machine's timers and event loop; a file that
 * is not polled is never seen, and one polled every 10 s (first poll 10 s after start, the
 * tests' first change well under a second after it) misses the bound. The wait is twice the
 * bound so that a late change is reported with its time.
 */
const FILE_CHANGE_BOUND_MS = 5_000;
const FILE_CHANGE_WAIT_MS = 2 * FILE_CHANGE_BOUND_MS;

describe("an emptied users file keeps the users last loaded", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let billing: string;
  let fresh = 0;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      files: {
        [USERS_FILE]: htpasswdFile({ [CRON.user]: CRON.password, [ALICE.user]: ALICE.password }),
      },
      config: {
        callers: { basic: { usersFile: USERS_FILE } },
        upstreams: [
          emulatorUpstream(emulator.url, "billing", {
            allow: [{ user: CRON.user }, { user: ALICE.user }],
          }),
        ],
      },
    });
    billing = `${gateway.url}/billing/echo`;
  });
  afterAll(async () => {
    await gateway?.close();
    await emulator?.close();
  });

  /**
   * The status of `who`, with a spelling of the scheme not sent before (basic, Basic, bAsic, …:
   * 32 of them): the cache is keyed by the header, so the answer comes from a fresh check.
   */
  const statusOf = async (who: { user: string; password: string }) => {
    fresh += 1;
    const scheme = [..."basic"].map((c, i) => ((fresh >> i) & 1 ? c.toUpperCase() : c)).join("");
    const header = basicHeader(who.user, who.password).replace(/^Basic/, scheme);
    return (await httpGet(billing, { headers: { "proxy-authorization": header } })).status;
  };
  const usersFileStatus = async () => {
    const status = JSON.parse(await adminText(gateway.adminUrl, "/status?format=json")) as {
      callers?: CallersStatus;
    };
    return status.callers?.usersFile;
  };

  it.each([
    ["truncated to 0 bytes", ""],
    ["left with comments only", "# users moved to vault\n\n# (none here)\n"],
    ["unparsable", "this is not an htpasswd file\n"],
  ])(
    "%s: refused with a warning, stale on /status, the old users still admitted",
    async (_, content) => {
      const refusals = logsMatching(gateway.records, REFUSED).length;
      const startedMs = performance.now();
      gateway.writeFile(USERS_FILE, content);
      await waitFor(
        () => logsMatching(gateway.records, REFUSED).length > refusals,
        "the warning about the refused users file",
        FILE_CHANGE_WAIT_MS,
      );
      expect(performance.now() - startedMs).toBeLessThan(FILE_CHANGE_BOUND_MS);
      expect(logsMatching(gateway.records, REFUSED).at(-1)).toMatchObject({
        level: "warn",
        usersInForce: 2,
      });
      expect(await statusOf(CRON)).toBe(200);
      expect(await statusOf(ALICE)).toBe(200);
      const file = await usersFileStatus();
      expect(file).toMatchObject({ users: 2, stale: true, generation: 0 });
      expect(Date.parse(file?.staleSince ?? "")).toBeGreaterThan(0);
      expect(file?.problem).toMatch(/defines no user|expected user:hash/);
      const page = await adminText(gateway.adminUrl, "/status?format=html");
      expect(page).toMatch(/users file <span class="badge b-stale">stale<\/span> 2 users/);
    },
  );

  it("a good replacement applies at the next poll (~1 s); the user it drops loses access", async () => {
    const appliedMs = await rewriteUsersFile(
      gateway,
      USERS_FILE,
      { [CRON.user]: CRON.password },
      FILE_CHANGE_WAIT_MS,
    );
    console.log(`[issue 30] users file replacement applied after ${Math.round(appliedMs)} ms`);
    expect(appliedMs).toBeLessThan(FILE_CHANGE_BOUND_MS);
    expect(await statusOf(CRON)).toBe(200);
    expect(await statusOf(ALICE)).toBe(407);
    const file = await usersFileStatus();
    expect(file).toMatchObject({ users: 1, stale: false, generation: 1 });
    expect(file).not.toHaveProperty("staleSince");
    const page = await adminText(gateway.adminUrl, "/status?format=html");
    expect(page).toMatch(/users file <span class="badge b-loaded">loaded<\/span> 1 user</);
  });
});
