import { describe, expect, it } from "vitest";
import { makeSource } from "./fake-endpoint.js";

describe("single flight", () => {
  it("1,000 concurrent getToken on a cold source cause exactly one token request", async () => {
    const { clock, source, endpoint } = makeSource();
    endpoint.latencyMs = 200;
    expect(source.status().state).toBe("idle");
    const pending = Array.from({ length: 1_000 }, () => source.getToken());
    expect(source.status().state).toBe("fetching");
    await clock.advance(200);
    const tokens = await Promise.all(pending);
    expect(endpoint.calls).toHaveLength(1);
    expect(new Set(tokens.map((t) => t.value))).toEqual(new Set(["tok-1"]));
    source.close();
  });

  it("callers during a background refresh get the cached token and start nothing", async () => {
    const { clock, source, endpoint } = makeSource({ random: () => 0 });
    endpoint.latencyMs = 1_000;
    source.start();
    await clock.advance(1_000);
    await clock.advance(449_500); // the refresh (at 75% = 450 s) is now in flight
    expect(endpoint.calls).toHaveLength(2);
    const tokens = await Promise.all(Array.from({ length: 1_000 }, () => source.getToken()));
    expect(new Set(tokens.map((t) => t.value))).toEqual(new Set(["tok-1"]));
    expect(endpoint.calls).toHaveLength(2);
    await clock.advance(500);
    expect(source.peekToken()?.value).toBe("tok-2");
    source.close();
  });

  it("1,000 callers after an invalidation share one request", async () => {
    const { clock, source, endpoint } = makeSource();
    endpoint.latencyMs = 100;
    source.start();
    await clock.advance(10_000);
    expect(source.invalidate(source.peekToken()!)).toBe(true);
    const pending = Array.from({ length: 1_000 }, () => source.getToken());
    await clock.advance(100);
    const tokens = await Promise.all(pending);
    expect(endpoint.calls).toHaveLength(2);
    expect(tokens.every((t) => t.value === "tok-2")).toBe(true);
    source.close();
  });
});
