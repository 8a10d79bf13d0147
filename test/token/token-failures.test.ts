import { describe, expect, it } from "vitest";
import { BearerProxyError } from "../../src/errors.js";
import { invalidClient, makeSource, track, unavailable } from "./fake-endpoint.js";
import { seededRandom, TEST_SECRET } from "./helpers.js";

describe("token endpoint failures", () => {
  it("backoff: full jitter doubling from 1 s to 30 s, never under the 1 s floor", async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const { clock, source, endpoint } = makeSource({ random: seededRandom(seed) });
      endpoint.answer = () => unavailable(503);
      source.start();
      while (endpoint.calls.length < 12) await clock.advanceToNextTimer();
      for (let n = 1; n < endpoint.calls.length; n++) {
        const gap = endpoint.calls[n]!.atMs - endpoint.calls[n - 1]!.atMs;
        const cap = Math.min(30_000, 1_000 * 2 ** (n - 1));
        expect(gap).toBeGreaterThanOrEqual(1_000);
        expect(gap).toBeLessThanOrEqual(Math.max(cap, 1_000));
      }
      expect(source.status()).toMatchObject({ state: "failed", failureCount: 12, fetchCount: 12 });
      source.close();
    }
  });

  it("with the top of every draw, the sequence is 1, 2, 4, 8, 16, 30, 30 s", async () => {
    const { clock, source, endpoint } = makeSource({ random: () => 0.999_999 });
    endpoint.answer = () => unavailable(500);
    source.start();
    while (endpoint.calls.length < 8) await clock.advanceToNextTimer();
    const gaps = endpoint.calls.slice(1).map((c, i) => c.atMs - endpoint.calls[i]!.atMs);
    expect(gaps).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
    source.close();
  });

  it("Retry-After (429) is honoured", async () => {
    const { clock, source, endpoint } = makeSource({ random: () => 0 });
    endpoint.answer = () => unavailable(429, 20);
    source.start();
    await clock.advance(0);
    await clock.advanceToNextTimer();
    expect(endpoint.calls[1]!.atMs - endpoint.calls[0]!.atMs).toBe(20_000);
    source.close();
  });

  it("serves the still-valid token during an outage, then rejects within the wait bound once it expires, then recovers", async () => {
    const { clock, source, endpoint, logs } = makeSource({ random: seededRandom(11) });
    source.start();
    await clock.advance(0);
    const first = source.peekToken()!;
    let down = true;
    endpoint.answer = () => (down ? unavailable(503) : endpoint.token(600));

    // Until 590 s (600 s minus the 10 s margin) every request gets the old token.
    for (let t = 1_000; t < 590_000; t += 1_000) {
      await clock.advance(1_000);
      expect((await source.getToken()).value).toBe(first.value);
    }
    expect(endpoint.calls.length).toBeGreaterThan(3);
    expect(source.status().state).toBe("degraded");
    expect(
      logs.records.some((r) => r.msg === "token refresh failed" && r.servingCachedToken === true),
    ).toBe(true);

    await clock.advance(1_000); // now past expiry minus margin: no usable token
    expect(source.peekToken()).toBeUndefined();
    expect(source.status().state).toBe("failed");
    const started = clock.now();
    const waiting = track(source.getToken());
    await clock.advance(5_000);
    expect(waiting.done).toBe(true);
    const error = waiting.error as BearerProxyError;
    expect(error).toBeInstanceOf(BearerProxyError);
    expect(error.code).toBe("BP_ERR_TOKEN_UNAVAILABLE");
    expect(error.statusCode).toBe(503);
    expect(error.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(error.message).toContain("no token for upstream files-api");
    expect(error.message).toContain("answered 503");
    expect(error.upstream).toBe("files-api");
    expect(clock.now() - started).toBeLessThanOrEqual(5_000);

    down = false;
    await clock.advance(31_000);
    expect(source.status()).toMatchObject({ state: "valid", lastError: undefined });
    expect((await source.getToken()).value).not.toBe(first.value);
    expect(logs.text()).not.toContain(TEST_SECRET);
  });

  it("a cold start that fails once and then succeeds serves the waiting request", async () => {
    const { clock, source, endpoint } = makeSource({ random: () => 0.5 });
    endpoint.answer = (call) =>
      endpoint.calls.indexOf(call) === 0 ? unavailable(502) : endpoint.token(600);
    const waiting = track(source.getToken());
    await clock.advance(1_000);
    expect(waiting.done).toBe(true);
    expect(waiting.value?.value).toBe("tok-1");
    expect(endpoint.calls).toHaveLength(2);
    source.close();
  });

  it("invalid_client: 502 token_rejected at once, a clear log, and no hammering", async () => {
    const { clock, source, endpoint, logs } = makeSource();
    endpoint.answer = () => invalidClient();
    source.start();
    await clock.advance(0);
    const started = clock.now();
    const error = await source.getToken().catch((e: BearerProxyError) => e);
    expect(clock.now()).toBe(started); // no point waiting for a retry 30 s away
    expect(error).toMatchObject({
      code: "BP_ERR_TOKEN_REJECTED",
      statusCode: 502,
      upstream: "files-api",
    });
    expect((error as BearerProxyError).message).toContain("invalid_client");
    expect((error as BearerProxyError).retryAfterSeconds).toBeGreaterThanOrEqual(30);
    const log = logs.records.find((r) => r.msg.includes("rejected the client credentials"))!;
    expect(log.msg).toBe(
      "the token endpoint rejected the client credentials (invalid_client): check clientId/clientSecret",
    );
    expect(log.level).toBe(50);
    // Ten minutes of requests: at most one attempt per 30 s.
    for (let t = 0; t < 600_000; t += 500) {
      // Not awaited: a request may wait on fake time, which only moves below.
      source.getToken().catch(() => undefined);
      await clock.advance(500);
    }
    expect(endpoint.calls.length).toBeLessThanOrEqual(21);
    expect(source.status().lastError).toMatchObject({ code: "token_rejected" });
    source.close();
  });

  it("a token endpoint that hangs: the first request fails after exactly the wait bound", async () => {
    const { clock, source, endpoint } = makeSource();
    endpoint.answer = () => "hang";
    const waiting = track(source.getToken());
    await clock.advance(4_999);
    expect(waiting.done).toBe(false);
    await clock.advance(1);
    expect(waiting.error).toMatchObject({ code: "BP_ERR_TOKEN_UNAVAILABLE", retryAfterSeconds: 1 });
    expect((waiting.error as Error).message).toBe(
      "no token for upstream files-api within 5000 ms: token endpoint https://idp.test/iam/v1/oauth2/token has not answered yet",
    );
    expect(endpoint.calls).toHaveLength(1);
    source.close();
  });
});
