import { describe, expect, it } from "vitest";
import { makeSource, track } from "./fake-endpoint.js";

describe("token source lifecycle", () => {
  it("lazy until used or started; start() prefetches once", async () => {
    const { clock, source, endpoint } = makeSource();
    await clock.advance(60_000);
    expect(endpoint.calls).toHaveLength(0);
    expect(source.status().state).toBe("idle");
    source.start();
    source.start();
    await clock.advance(0);
    expect(endpoint.calls).toHaveLength(1);
    source.start();
    expect(endpoint.calls).toHaveLength(1);
    source.close();
  });

  it("an aborted signal stops the wait, not the fetch", async () => {
    const { clock, source, endpoint } = makeSource();
    endpoint.latencyMs = 1_000;
    const controller = new AbortController();
    const waiting = track(source.getToken(controller.signal));
    const other = track(source.getToken());
    await clock.advance(100);
    const reason = new Error("client went away");
    controller.abort(reason);
    await clock.advance(0);
    expect(waiting.error).toBe(reason);
    expect(other.done).toBe(false);
    await clock.advance(900);
    expect(other.value?.value).toBe("tok-1");
    // Already aborted: rejects at once, without waiting.
    endpoint.answer = () => "hang";
    await clock.advance(2_000);
    expect(source.invalidate(source.peekToken()!)).toBe(true);
    const pre = new AbortController();
    pre.abort(reason);
    await expect(source.getToken(pre.signal)).rejects.toBe(reason);
    source.close();
  });

  it("close() stops timers, aborts the fetch and rejects waiters; later calls reject", async () => {
    const { clock, source, endpoint } = makeSource();
    source.start();
    await clock.advance(0);
    expect(clock.pendingTimers).toBe(1); // the refresh
    source.invalidate({ ...source.peekToken()!, value: "x" });
    endpoint.answer = () => "hang";
    await clock.advance(500_000); // refresh in flight, hanging
    expect(endpoint.calls).toHaveLength(2);
    await clock.advance(100_000); // old token expired
    const waiting = track(source.getToken());
    source.close();
    await clock.advance(0);
    expect(endpoint.calls[1]!.signal.aborted).toBe(true);
    expect(waiting.error).toMatchObject({ code: "BP_ERR_TOKEN_UNAVAILABLE" });
    expect((waiting.error as Error).message).toContain("the token source is closed");
    expect(clock.pendingTimers).toBe(0);
    await expect(source.getToken()).rejects.toMatchObject({ code: "BP_ERR_TOKEN_UNAVAILABLE" });
    expect(source.peekToken()).toBeUndefined();
    expect(source.status().state).toBe("closed");
    source.close();
  });

  it("metrics: fetch outcomes, durations and the expiry timestamp", async () => {
    const { createMetrics } = await import("../../src/observability/metrics.js");
    const metrics = createMetrics({ collectProcessMetrics: false });
    const { clock, source, endpoint } = makeSource({ extra: { metrics } });
    endpoint.latencyMs = 250;
    source.start();
    await clock.advance(250);
    const text = await metrics.registry.metrics();
    expect(text).toContain(
      'bearer_proxy_token_fetches_total{upstream="files-api",outcome="success"} 1',
    );
    expect(text).toContain(
      'bearer_proxy_token_fetch_duration_seconds_count{upstream="files-api"} 1',
    );
    expect(text).toContain(
      `bearer_proxy_token_expiry_timestamp_seconds{upstream="files-api"} ${(clock.wallStartMs + 600_000) / 1000}`,
    );
    source.close();
  });
});
