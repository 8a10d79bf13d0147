import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import {
  emulatorConfigYaml,
  httpCall,
  logRecords,
  pollUntil,
  useCliProcesses,
  useTempDir,
  waitUntilReady,
} from "../cli/helpers.js";
import { useEmulator } from "../helpers/emulator.js";

describe.concurrent("bearer-proxy run: signals and /quitquitquit", () => {
  const emulator = useEmulator();
  // Concurrent tests: children are killed after the file, not after each test.
  const cli = useCliProcesses({ cleanup: "afterAll" });
  const dir = useTempDir("bp-signals-");

  async function startRun(name: string, options: { drainDelay: string; timeout: string }) {
    const file = join(dir(), `${name}.yaml`);
    writeFileSync(file, emulatorConfigYaml(emulator(), options));
    const proc = cli.start(["run", "--config", file]);
    const urls = await proc.ports();
    await waitUntilReady(urls.adminUrl);
    return { proc, ...urls };
  }

  const readyzStatus = async (adminUrl: string) => (await httpCall(`${adminUrl}/readyz`)).status;

  it("a second SIGTERM well after the first exits at once, non-zero", async () => {
    // A 20 s drain: only the second signal can end this process within the test.
    const { proc, adminUrl } = await startRun("second-signal", {
      drainDelay: "20s",
      timeout: "3s",
    });
    proc.child.kill("SIGTERM");
    // The first signal was handled once readiness fails; the second comes ≥ 700 ms after that
    // (the child treats one within 500 ms as the same Ctrl-C).
    await pollUntil(async () => (await readyzStatus(adminUrl)) === 503, 5_000, "readyz 503");
    await sleep(700);
    const secondAtMs = performance.now();
    proc.child.kill("SIGTERM");
    const { code, signal, atMs } = await proc.exited;
    expect(signal).toBeNull();
    expect(code).not.toBe(0);
    expect(code).toBe(1);
    // At once: the drain alone would take 20 s.
    expect(atMs - secondAtMs).toBeLessThan(5_000);
    expect(
      logRecords(proc.stdout()).find((r) => r.msg === "second signal: exiting now"),
    ).toMatchObject({
      level: "warn",
      signal: "SIGTERM",
    });
  });

  it("two SIGINTs 5 ms apart (one Ctrl-C under npm) are one graceful shutdown: exit 0", async () => {
    // A 3 s drain: readiness, then a proxied request, fit in it even in a loaded child.
    const { proc, proxyUrl, adminUrl } = await startRun("double-sigint", {
      drainDelay: "3s",
      timeout: "3s",
    });
    const firstAtMs = performance.now();
    proc.child.kill("SIGINT");
    await sleep(5);
    proc.child.kill("SIGINT");
    await pollUntil(async () => (await readyzStatus(adminUrl)) === 503, 2_000, "readyz 503");
    // Still draining, not exited: requests are served.
    expect((await httpCall(`${proxyUrl}/platform/v1/spreadsheets/ctrl-c`)).status).toBe(200);
    const { code, signal, atMs } = await proc.exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    // Exited after the whole drain, not at the second SIGINT.
    expect(atMs - firstAtMs).toBeGreaterThanOrEqual(2_950);
    expect(proc.stdout()).not.toContain("second signal");
    expect(logRecords(proc.stdout()).find((r) => r.reason === "SIGINT")).toBeDefined();
  });

  it("POST /quitquitquit from loopback answers 202, drains and exits 0", async () => {
    // A 3 s drain: readiness, then a proxied request, fit in it even in a loaded child.
    const { proc, proxyUrl, adminUrl } = await startRun("quit", {
      drainDelay: "3s",
      timeout: "3s",
    });
    // Only POST quits.
    expect((await httpCall(`${adminUrl}/quitquitquit`)).status).toBeGreaterThanOrEqual(400);
    expect(await readyzStatus(adminUrl)).toBe(200);

    // A plain POST (what an HTML form could send) is refused.
    expect((await httpCall(`${adminUrl}/quitquitquit`, { method: "POST" })).status).toBe(403);
    const quit = await httpCall(`${adminUrl}/quitquitquit`, {
      method: "POST",
      headers: { "content-type": "application/json" },
    });
    expect(quit.status).toBe(202);
    expect(JSON.parse(quit.body)).toEqual({ status: "quitting" });
    await pollUntil(async () => (await readyzStatus(adminUrl)) === 503, 2_000, "readyz 503");
    expect((await httpCall(`${proxyUrl}/platform/v1/spreadsheets/quit`)).status).toBe(200);
    // A second request is accepted and changes nothing.
    expect(
      (
        await httpCall(`${adminUrl}/quitquitquit`, {
          method: "POST",
          headers: { "x-requested-with": "test" },
        })
      ).status,
    ).toBe(202);

    const { code, signal } = await proc.exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(logRecords(proc.stdout()).find((r) => r.reason === "quitquitquit")).toBeDefined();
    expect(proc.stdout()).toContain('"msg":"stopped"');
  });
});
