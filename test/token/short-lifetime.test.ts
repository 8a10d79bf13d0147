import { describe, expect, it } from "vitest";
import { makeSource } from "./fake-endpoint.js";

describe("very short token lifetimes", () => {
  it("1-second tokens: honoured, never used past expiry, at most one request per second", async () => {
    const { clock, source, endpoint } = makeSource({ policy: { waitTimeoutMs: 5_000 } });
    endpoint.answer = () => endpoint.token(1);
    endpoint.latencyMs = 20;
    source.start();
    let served = 0;
    for (let t = 0; t < 60_000; t += 50) {
      await clock.advance(50);
      const token = source.peekToken();
      if (token) {
        served++;
        expect(token.lifetimeMs).toBe(1_000);
        expect(clock.now()).toBeLessThan(token.expiresAtMs);
      }
    }
    const gaps = endpoint.calls.slice(1).map((c, i) => c.atMs - endpoint.calls[i]!.atMs);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(1_000);
    expect(endpoint.calls.length).toBeLessThanOrEqual(61);
    expect(endpoint.calls.length).toBeGreaterThanOrEqual(55);
    // The token is usable most of the time (it dies at 900 ms; the next arrives at 1,020 ms).
    expect(served).toBeGreaterThan(1_000);
    source.close();
  });

  it("a token that expires before it arrives is not handed out; the source asks again after the floor", async () => {
    const { clock, source, endpoint, logs } = makeSource();
    endpoint.latencyMs = 1_500;
    endpoint.answer = (call) => endpoint.token(endpoint.calls.indexOf(call) === 0 ? 1 : 600);
    const waiting = source.getToken();
    await clock.advance(1_500);
    expect(logs.records.some((r) => r.msg === "token expired before it could be used")).toBe(true);
    expect(endpoint.calls).toHaveLength(2);
    await clock.advance(1_500);
    expect((await waiting).value).toBe("tok-2");
    source.close();
  });
});
