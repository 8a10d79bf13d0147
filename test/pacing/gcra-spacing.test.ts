/**
 * Issue 26: the pacing rules as functions of time. Even spacing, a burst that goes at once but
 * never adds to the limit, and — for any arrival pattern — never more than `requests` departures
 * within any window of `per`.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  admitAt,
  createPaceState,
  earliestStartMs,
  type PaceRate,
  paceParams,
  remainingAt,
} from "../../src/pacing/gcra.js";
import { maxInAnyWindow } from "../helpers/limited-upstream.js";

/** Departure times of FIFO requests arriving at `arrivals` (sorted), each going at its turn. */
function departures(rate: PaceRate, arrivals: readonly number[]): number[] {
  const params = paceParams(rate);
  const state = createPaceState(params);
  const out: number[] = [];
  let lastMs = Number.NEGATIVE_INFINITY;
  for (const arrivalMs of arrivals) {
    // FIFO: nobody goes before the one ahead of it.
    const atMs = earliestStartMs(state, params, Math.max(arrivalMs, lastMs));
    admitAt(state, params, atMs);
    out.push(atMs);
    lastMs = atMs;
  }
  return out;
}

describe("GCRA with a window cap", () => {
  it("spaces requests evenly with burst 0: one every (per + margin) / requests", () => {
    const rate = { requests: 20, perMs: 1_000, burst: 0, marginMs: 0 };
    const times = departures(rate, new Array(5).fill(0));
    expect(times).toEqual([0, 50, 100, 150, 200]);
  });

  it("adds the default margin (2% of per, at least 10 ms) to the window", () => {
    expect(paceParams({ requests: 50, perMs: 1_000, burst: 0 }).intervalMs).toBeCloseTo(20.4);
    expect(paceParams({ requests: 10, perMs: 100, burst: 0 }).windowMs).toBe(110);
  });

  it("lets burst + 1 go at once after a lull, then spaces the rest", () => {
    const rate = { requests: 20, perMs: 1_000, burst: 5, marginMs: 0 };
    const times = departures(rate, new Array(9).fill(0));
    expect(times.slice(0, 6)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(times.slice(6)).toEqual([50, 100, 150]);
  });

  it("takes the burst out of the window's share: 20 in the first second, not 25", () => {
    const rate = { requests: 20, perMs: 1_000, burst: 5, marginMs: 0 };
    const times = departures(rate, new Array(60).fill(0));
    expect(maxInAnyWindow(times, 1_000)).toBe(20);
    // 6 at once, 14 spaced, then the cap holds the rest until the first 6 are a second old.
    expect(times[19]).toBe(700);
    expect(times[20]).toBe(1_000);
    // Over three seconds the pacer still delivers the full rate.
    expect(times[59]).toBeLessThan(3_000);
  });

  it("tells how many could go at once", () => {
    const params = paceParams({ requests: 20, perMs: 1_000, burst: 5, marginMs: 0 });
    const state = createPaceState(params);
    expect(remainingAt(state, params, 0)).toBe(6);
    expect(admitAt(state, params, 0)).toBe(5);
    for (let i = 0; i < 5; i++) admitAt(state, params, 0);
    expect(remainingAt(state, params, 0)).toBe(0);
    expect(earliestStartMs(state, params, 0)).toBe(50);
    expect(remainingAt(state, params, 100)).toBe(2);
  });

  it("never lets more than `requests` go within any window of `per`, whatever the arrivals", () => {
    fc.assert(
      fc.property(
        fc.record({
          requests: fc.integer({ min: 1, max: 30 }),
          perMs: fc.integer({ min: 50, max: 2_000 }),
          burstShare: fc.double({ min: 0, max: 1, noNaN: true }),
        }),
        fc.array(fc.integer({ min: 0, max: 5_000 }), { minLength: 1, maxLength: 200 }),
        ({ requests, perMs, burstShare }, raw) => {
          const rate = { requests, perMs, burst: Math.floor(burstShare * (requests - 1)) };
          const arrivals = [...raw].sort((a, b) => a - b);
          const times = departures(rate, arrivals);
          expect(maxInAnyWindow(times, perMs)).toBeLessThanOrEqual(requests);
          for (const [i, t] of times.entries()) expect(t).toBeGreaterThanOrEqual(arrivals[i]!);
        },
      ),
    );
  });
});
