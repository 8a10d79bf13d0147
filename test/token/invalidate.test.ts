import { describe, expect, it } from "vitest";
import { makeSource } from "./fake-endpoint.js";

describe("invalidate(token) after an upstream 401", () => {
  it("drops the cached token when it is old enough, and the next request gets a new one", async () => {
    const { clock, source, endpoint, logs } = makeSource();
    source.start();
    await clock.advance(0);
    const token = source.peekToken()!;
    await clock.advance(2_000);
    expect(source.invalidate(token)).toBe(true);
    expect(source.peekToken()).toBeUndefined();
    await clock.advance(0);
    expect(endpoint.calls).toHaveLength(2);
    const fresh = await source.getToken();
    expect(fresh.value).toBe("tok-2");
    expect(logs.records.some((r) => r.msg === "token invalidated after an upstream 401")).toBe(
      true,
    );
    // Invalidating the same (now stale) token again does nothing.
    await clock.advance(5_000);
    expect(source.invalidate(token)).toBe(false);
    expect(source.peekToken()?.value).toBe("tok-2");
    expect(endpoint.calls).toHaveLength(2);
    source.close();
  });

  it("ignores a token fetched less than minAgeBeforeInvalidate ago (no 401 loops)", async () => {
    const { clock, source, endpoint } = makeSource();
    source.start();
    await clock.advance(1_999);
    expect(source.invalidate(source.peekToken()!)).toBe(false);
    expect(source.peekToken()?.value).toBe("tok-1");
    expect(endpoint.calls).toHaveLength(1);
    source.close();
  });

  it("ignores a token that is no longer the cached one (someone already refreshed)", async () => {
    const { clock, source, endpoint } = makeSource({ random: () => 0 });
    source.start();
    await clock.advance(0);
    const old = source.peekToken()!;
    await clock.advance(460_000); // background refresh at 450 s replaced it
    expect(source.peekToken()?.value).toBe("tok-2");
    expect(source.invalidate(old)).toBe(false);
    expect(source.invalidate({ ...old, value: "forged" })).toBe(false);
    expect(source.peekToken()?.value).toBe("tok-2");
    expect(endpoint.calls).toHaveLength(2);
    source.close();
  });

  it("respects the min refresh interval: a refresh right after a fetch is delayed, not skipped", async () => {
    const { clock, source, endpoint } = makeSource({
      policy: { minAgeBeforeInvalidateMs: 0, minRefreshIntervalMs: 1_000 },
    });
    source.start();
    await clock.advance(100);
    expect(source.invalidate(source.peekToken()!)).toBe(true);
    expect(endpoint.calls).toHaveLength(1);
    await clock.advance(899);
    expect(endpoint.calls).toHaveLength(1);
    await clock.advance(1);
    expect(endpoint.calls).toHaveLength(2);
    source.close();
  });
});
