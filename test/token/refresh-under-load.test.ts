/**
 * REAL-TIME TEST (~12 s): the emulator issues 3-second tokens (expires_in 2, it reports one second
 * less than the lifetime), the token source runs on the real clock, and constant load asks for
 * tokens and uses them on the API. Shows zero failures, zero waits once warm, no token used
 * after expiry, and a token request count matching background refreshes at 50–60% of lifetime.
 * The long variant (30 s and more, through the proxy) is bench/token-refresh-soak.mjs.
 *
 * Why 50–60% and not the default 75–85%: a token is usable until 90% of its 2 s (the 10%
 * margin), so the default left 100–300 ms for a late timer plus a TLS fetch to an emulator on
 * the same busy event loop, six or seven times a run; a loaded CI machine missed that. At
 * 50–60% the refresh has 600–800 ms (the 1 s minRefreshInterval is still met), while a source
 * that only fetched on demand would still wait once a token.
 */
import { describe, expect, it } from "vitest";
import { createTokenSource } from "../../src/token/token-source.js";
import { useEmulator } from "../helpers/emulator.js";
import { callApi, emulatorSpec, tokenDispatcher } from "./emulator-support.js";
import { captureLogs, DEFAULT_POLICY } from "./helpers.js";

const RUN_MS = 12_000;
/** Refresh between 50% and 60% of the lifetime (see above). */
const REFRESH_WINDOW = [0.5, 0.6] as const;
const MEAN_REFRESH_FRACTION = (REFRESH_WINDOW[0] + REFRESH_WINDOW[1]) / 2;
const emulator = useEmulator({ tokenLifetimeSeconds: 3 });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("refresh under constant load (real clock, 3-second tokens)", () => {
  it("zero failures, zero waits when warm, token requests ≈ run / (0.55 × lifetime)", {
    timeout: 20_000,
  }, async () => {
    const spec = emulatorSpec(emulator(), "default");
    const apiDispatcher = tokenDispatcher(spec.tls);
    const dispatcher = tokenDispatcher(spec.tls);
    const logs = captureLogs();
    const source = createTokenSource({
      upstream: "emu",
      spec,
      policy: { ...DEFAULT_POLICY, refreshWindow: REFRESH_WINDOW },
      dispatcher,
      logger: logs.logger,
    });
    source.start();
    await source.getToken(); // warm
    emulator().resetStats();
    const lifetimeMs = source.peekToken()!.lifetimeMs;

    const counts = {
      getToken: 0,
      failures: 0,
      waits: 0,
      apiCalls: 0,
      apiRejected: 0,
      pastExpiry: 0,
    };
    const deadline = performance.now() + RUN_MS;
    const caller = async () => {
      while (performance.now() < deadline) {
        if (!source.peekToken()) counts.waits++;
        try {
          const token = await source.getToken();
          counts.getToken++;
          if (performance.now() >= token.expiresAtMs) counts.pastExpiry++;
        } catch {
          counts.failures++;
        }
        await sleep(2);
      }
    };
    const apiUser = async () => {
      while (performance.now() < deadline) {
        const token = await source.getToken().catch(() => undefined);
        if (!token) continue;
        counts.apiCalls++;
        const status = await callApi(emulator(), apiDispatcher, "default", token.value);
        if (status !== 200) counts.apiRejected++;
        await sleep(10);
      }
    };
    await Promise.all([caller(), caller(), caller(), caller(), apiUser(), apiUser()]);
    const tokenRequests = emulator().stats().tokenRequests.total;
    source.close();
    await apiDispatcher.close();
    await dispatcher.close();

    // Refreshes start 50–60% into each token's life: RUN_MS / (0.55 × lifetime) on average.
    const expected = RUN_MS / (MEAN_REFRESH_FRACTION * lifetimeMs);
    console.log(
      `refresh-under-load: lifetime ${lifetimeMs} ms, ${RUN_MS} ms run, token requests ${tokenRequests} (expected ≈ ${expected.toFixed(1)}), ` +
        `getToken ${counts.getToken}, failures ${counts.failures}, waits ${counts.waits}, ` +
        `API calls ${counts.apiCalls}, API rejected ${counts.apiRejected}, past expiry ${counts.pastExpiry}`,
    );
    expect(lifetimeMs).toBe(2_000);
    expect(counts.failures).toBe(0);
    expect(counts.waits).toBe(0);
    expect(counts.pastExpiry).toBe(0);
    expect(counts.apiRejected).toBe(0);
    expect(counts.getToken).toBeGreaterThan(1_000);
    expect(counts.apiCalls).toBeGreaterThan(100);
    // One refresh per 1.0–1.2 s (plus a late timer's delay): 10–12 in 12 s. Bounds: a timer 300
    // ms late on average still makes 8; refreshing only at the 90% margin would make 6, a
    // refresh per 0.8 s or less 15 and more.
    expect(tokenRequests).toBeGreaterThanOrEqual(
      Math.floor(RUN_MS / (REFRESH_WINDOW[1] * lifetimeMs + 300)),
    );
    expect(tokenRequests).toBeLessThanOrEqual(
      Math.ceil(RUN_MS / (REFRESH_WINDOW[0] * lifetimeMs)) + 1,
    );
    expect(emulator().stats().tokenRequests.rejected).toBe(0);
  });
});
