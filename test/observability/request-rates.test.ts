import { describe, expect, it } from "vitest";
import {
  createRequestRates,
  RATE_BUCKET_MS,
  RATE_BUCKETS,
} from "../../src/observability/request-rates.js";

// A start well past zero, aligned to a bucket, like performance.now() after a while.
const T0 = 1_000 * RATE_BUCKET_MS;

describe("request rates ring buffer", () => {
  it("counts requests and errors per 15 s bucket, oldest first, per upstream and in total", () => {
    const rates = createRequestRates();
    rates.record("files", false, T0 + 1_000);
    rates.record("files", true, T0 + 2_000);
    rates.record("files", false, T0 + RATE_BUCKET_MS + 5);
    rates.record("none", true, T0 + RATE_BUCKET_MS + 6);

    const now = T0 + RATE_BUCKET_MS + 7_500;
    const files = rates.series("files", now);
    expect(files.requests).toHaveLength(RATE_BUCKETS);
    expect(files.requests.slice(-2)).toEqual([2, 1]);
    expect(files.errors.slice(-2)).toEqual([1, 0]);
    expect(files.requests.slice(0, -2).every((n) => n === 0)).toBe(true);
    expect(files.startMs).toBe(T0 + RATE_BUCKET_MS - (RATE_BUCKETS - 1) * RATE_BUCKET_MS);
    const total = rates.totalSeries(now);
    expect(total.requests.slice(-2)).toEqual([2, 2]);
    expect(total.errors.slice(-2)).toEqual([1, 1]);
    expect(rates.series("never-used", now).requests.every((n) => n === 0)).toBe(true);

    // Last minute = three full buckets + 7.5 s of the current one.
    expect(rates.recent("files", now)).toEqual({
      requestsPerSecond: Math.round((3 / 52.5) * 100) / 100,
      errorsPerSecond: Math.round((1 / 52.5) * 100) / 100,
      requests15m: 3,
      errors15m: 1,
    });
    expect(rates.totalRecent(now)).toMatchObject({ requests15m: 4, errors15m: 2 });
  });

  it("forgets buckets older than 15 minutes, also across a long silence", () => {
    const rates = createRequestRates();
    rates.record("files", true, T0);
    const later = T0 + (RATE_BUCKETS - 1) * RATE_BUCKET_MS;
    expect(rates.series("files", later).requests[0]).toBe(1);
    expect(rates.recent("files", later)).toMatchObject({ requests15m: 1, errors15m: 1 });
    const expired = T0 + RATE_BUCKETS * RATE_BUCKET_MS;
    expect(rates.series("files", expired).requests.every((n) => n === 0)).toBe(true);
    expect(rates.recent("files", expired)).toMatchObject({ requests15m: 0, errors15m: 0 });

    // A write after the silence reuses the slot without the old count.
    rates.record("files", false, expired + 10);
    expect(rates.series("files", expired + 20).requests.slice(-1)).toEqual([1]);
    expect(rates.recent("files", expired + 20)).toMatchObject({ requests15m: 1, errors15m: 0 });
    // A write a few buckets on clears the buckets in between.
    rates.record("files", false, expired + 3 * RATE_BUCKET_MS);
    expect(rates.series("files", expired + 3 * RATE_BUCKET_MS).requests.slice(-4)).toEqual([
      1, 0, 0, 1,
    ]);
  });

  it("reads right in a process younger than 15 minutes (the clock starts at zero)", () => {
    const rates = createRequestRates();
    rates.record("files", true, 20_000);
    rates.record("other", false, 40_000);
    const series = rates.series("files", 50_000);
    expect(series.requests.every((n) => Number.isInteger(n))).toBe(true);
    expect(series.requests.slice(-3)).toEqual([1, 0, 0]); // buckets 15–30 s, 30–45 s, 45–60 s
    expect(series.requests.reduce((a, b) => a + b, 0)).toBe(1);
    expect(rates.totalSeries(50_000).requests.reduce((a, b) => a + b, 0)).toBe(2);
    expect(rates.recent("files", 50_000)).toMatchObject({ requests15m: 1, errors15m: 1 });
  });

  it("holds 10,000 upstreams in under 5 MiB of counters", () => {
    const rates = createRequestRates();
    for (let i = 0; i < 10_000; i++) rates.record(`svc-${i}`, i % 7 === 0, T0 + i);
    expect(rates.bytes()).toBeLessThan(5 * 1024 * 1024);
    expect(rates.totalRecent(T0 + 10_000)).toMatchObject({ requests15m: 10_000 });
    expect(rates.recent("svc-7", T0 + 10_000)).toMatchObject({ requests15m: 1, errors15m: 1 });
  });
});
