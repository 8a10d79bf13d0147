/**
 * Issue 26: which requests may be sent again, when, and how many retries the budget allows.
 */
import { describe, expect, it } from "vitest";
import {
  createRetryBudget,
  DEFAULT_RETRY_ON,
  isRetrySafe,
  type RetryPolicy,
  retryDelayMs,
  shouldRetry,
} from "../../src/pacing/retry-policy.js";

const POLICY: RetryPolicy = {
  attempts: 1,
  on: DEFAULT_RETRY_ON,
  backoffBaseMs: 50,
  backoffMaxMs: 1_000,
};

describe("isRetrySafe", () => {
  it("allows the idempotent methods of RFC 9110 §9.2.2", () => {
    for (const method of ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]) {
      expect(isRetrySafe(method, {})).toBe(true);
    }
  });

  it("refuses POST and PATCH without an Idempotency-Key", () => {
    expect(isRetrySafe("POST", {})).toBe(false);
    expect(isRetrySafe("PATCH", ["content-type", "application/json"])).toBe(false);
    expect(isRetrySafe("POST", { "idempotency-key": "  " })).toBe(false);
  });

  it("allows any method with an Idempotency-Key, in either header shape", () => {
    expect(isRetrySafe("POST", { "idempotency-key": "8e03978e-40d5" })).toBe(true);
    expect(isRetrySafe("PATCH", ["Host", "x", "Idempotency-Key", '"8e03978e"'])).toBe(true);
  });
});

describe("shouldRetry", () => {
  it("retries the listed failures up to `attempts`, only before anything was relayed", () => {
    expect(shouldRetry(POLICY, { attempt: 1, reason: "reset", bytesRelayed: 0 })).toBe(true);
    expect(shouldRetry(POLICY, { attempt: 1, reason: "connect", bytesRelayed: 0 })).toBe(true);
    expect(shouldRetry(POLICY, { attempt: 2, reason: "reset", bytesRelayed: 0 })).toBe(false);
    expect(shouldRetry(POLICY, { attempt: 1, reason: "reset", bytesRelayed: 1 })).toBe(false);
    expect(shouldRetry(POLICY, { attempt: 1, reason: "503", bytesRelayed: 0 })).toBe(false);
    const withStatuses = { ...POLICY, on: [...DEFAULT_RETRY_ON, "502", "503", "504"] as const };
    expect(shouldRetry(withStatuses, { attempt: 1, reason: "503", bytesRelayed: 0 })).toBe(true);
    expect(
      shouldRetry({ ...POLICY, attempts: 0 }, { attempt: 1, reason: "reset", bytesRelayed: 0 }),
    ).toBe(false);
  });

  it("waits a full-jitter backoff: uniform below base · 2^(attempt - 1), capped", () => {
    expect(retryDelayMs(POLICY, 1, () => 0)).toBe(0);
    expect(retryDelayMs(POLICY, 1, () => 0.999)).toBe(50);
    expect(retryDelayMs(POLICY, 3, () => 0.5)).toBe(100);
    expect(retryDelayMs(POLICY, 10, () => 0.999)).toBe(999);
  });
});

describe("retry budget", () => {
  it("caps retries at the share of requests over the window, above a small floor", () => {
    let nowMs = 0;
    const budget = createRetryBudget({ percent: 20, minPerSecond: 0.5, now: () => nowMs });
    // Floor: 0.5/s over 10 s = 5 retries even with no traffic.
    let granted = 0;
    while (budget.tryAcquireRetry()) granted++;
    expect(granted).toBe(5);
    // 100 requests: 20% = 20 retries in the window, 5 of them already taken.
    for (let i = 0; i < 100; i++) budget.recordRequest();
    granted = 0;
    while (budget.tryAcquireRetry()) granted++;
    expect(granted).toBe(15);
    expect(budget.state()).toEqual({ requests: 100, retries: 20, allowedRetries: 20 });
    // The window slides: 10 s later the old requests and retries have left it.
    nowMs += 10_000;
    expect(budget.state()).toEqual({ requests: 0, retries: 0, allowedRetries: 5 });
  });

  it("stops a retry storm: a failing upstream gets at most the budget's share retried", () => {
    let nowMs = 0;
    const budget = createRetryBudget({ percent: 20, now: () => nowMs });
    let retries = 0;
    for (let i = 0; i < 1_000; i++) {
      nowMs += 5; // 200 requests/s, every one failing
      budget.recordRequest();
      if (budget.tryAcquireRetry()) retries++;
    }
    // 5 s of traffic: 1000 requests → at most 200 retries (the floor of 30 is below that).
    expect(retries).toBeLessThanOrEqual(200);
    expect(retries).toBeGreaterThan(150);
  });
});
