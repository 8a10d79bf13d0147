import { describe, expect, it } from "vitest";
import { makeSource } from "./fake-endpoint.js";
import { seededRandom } from "./helpers.js";

describe("background refresh timing", () => {
  it("the refresh point is uniform in [75%, 85%] of the lifetime (many draws)", async () => {
    const random = seededRandom(42);
    const fractions: number[] = [];
    for (let i = 0; i < 400; i++) {
      const { clock, source } = makeSource({ random });
      source.start();
      await clock.advance(0);
      expect(source.status().state).toBe("valid");
      fractions.push(clock.nextTimerAt()! / 600_000);
      source.close();
    }
    expect(Math.min(...fractions)).toBeGreaterThanOrEqual(0.75);
    expect(Math.max(...fractions)).toBeLessThanOrEqual(0.85);
    // Spread: every tenth of the window is hit, and both ends are approached.
    const bins = new Array(10).fill(0);
    for (const f of fractions) bins[Math.min(9, Math.floor((f - 0.75) / 0.01))]++;
    expect(Math.min(...bins)).toBeGreaterThan(15);
    expect(Math.min(...fractions)).toBeLessThan(0.752);
    expect(Math.max(...fractions)).toBeGreaterThan(0.848);
  });

  it("a configured window is honoured", async () => {
    const { clock, source } = makeSource({ policy: { refreshWindow: [0.5, 0.5] } });
    source.start();
    await clock.advance(0);
    expect(clock.nextTimerAt()).toBe(300_000);
    source.close();
  });

  it("refreshes run in the background: warm requests never wait, over 30 minutes", async () => {
    const { clock, source, endpoint } = makeSource({ random: seededRandom(9) });
    endpoint.latencyMs = 300;
    source.start();
    await clock.advance(300);
    let waited = 0;
    for (let t = 0; t < 30 * 60_000; t += 250) {
      if (!source.peekToken()) waited++;
      const token = await source.getToken();
      expect(clock.now()).toBeLessThan(token.expiresAtMs);
      await clock.advance(250);
    }
    expect(waited).toBe(0);
    // 1 prefetch + one refresh every 450–510 s over 1800 s: 4 or 5 requests, all background.
    expect(endpoint.calls.length).toBeGreaterThanOrEqual(4);
    expect(endpoint.calls.length).toBeLessThanOrEqual(5);
    for (let i = 1; i < endpoint.calls.length; i++) {
      const gap = endpoint.calls[i]!.atMs - endpoint.calls[i - 1]!.atMs;
      expect(gap).toBeGreaterThanOrEqual(0.75 * 599_000);
      expect(gap).toBeLessThanOrEqual(0.85 * 600_000 + 1);
    }
    source.close();
  });

  it("a missing expires_in uses the policy default; status reports the token secret-free", async () => {
    const { clock, source, endpoint, logs } = makeSource({
      policy: { defaultExpiresInMs: 60_000 },
    });
    endpoint.answer = () => endpoint.token(undefined, "files:read");
    source.start();
    await clock.advance(0);
    const token = source.peekToken()!;
    expect(token.lifetimeMs).toBe(60_000);
    expect(token.fingerprint).toMatch(/^[0-9a-f]{8}$/);
    const status = source.status();
    expect(status).toMatchObject({
      state: "valid",
      fingerprint: token.fingerprint,
      scope: "files:read",
      expiresAtWallMs: clock.wallStartMs + 60_000,
      fetchCount: 1,
      failureCount: 0,
      lastError: undefined,
    });
    expect(status.nextRefreshAtWallMs! - clock.wallStartMs).toBeGreaterThanOrEqual(45_000);
    expect(JSON.stringify(status)).not.toContain(token.value);
    const fetched = logs.records.find((r) => r.msg === "token fetched")!;
    expect(fetched).toMatchObject({
      upstream: "files-api",
      fingerprint: token.fingerprint,
      lifetimeS: 60,
    });
    expect(logs.text()).not.toContain(token.value);
    source.close();
  });
});
