/**
 * Issue 33: the footprint's latency "added" is over the direct path, which is measured once per
 * round, minutes before some of the cells. A stall during one round's direct run (p99 170 ms, seen
 * on this VM) must not make every cell of that round read a negative "added" and pass its target,
 * and a direct run that failed (its quantiles read 0) must not become the base of every round.
 */
import { describe, expect, it } from "vitest";

type Stats = { median: number; min: number; max: number };
const { summarizeFootprint, renderDirectLine, addedLatencyVerdict } = (await import(
  new URL("../../bench/footprint.mjs", import.meta.url).href
)) as {
  summarizeFootprint: (
    cells: unknown[],
    direct: unknown[],
  ) => { rates: { p99AddedMs: Stats; p50AddedMs: Stats }[] }[];
  renderDirectLine: (direct: unknown[], rates: number[]) => string;
  addedLatencyVerdict: (s: Stats | undefined, limit: number) => string;
};

const latency = (p99Ms: number, requests = 40_000, errors = 0) => ({
  rate: 2000,
  requests,
  errors,
  p50Ms: p99Ms / 4,
  p99Ms,
  p999Ms: p99Ms * 2,
  maxMs: p99Ms * 3,
  typicalSecondP99Ms: p99Ms,
  loopLagMaxMs: 1,
});

const cell = (round: number, p99Ms: number) => ({
  round,
  node: "v24",
  flags: "image",
  readyMs: 300,
  cpuToReadyMs: 280,
  idleRssMiB: 60,
  peakRssMiB: 100,
  rates: [latency(p99Ms)],
});

describe("footprint summary: latency added over the direct path", () => {
  it("takes each quantile's lowest direct over the rounds, so a stalled direct run adds nothing negative", () => {
    const direct = [
      { round: 1, rates: [latency(170)] }, // the VM stalled during this run
      { round: 2, rates: [latency(1)] },
    ];
    const [row] = summarizeFootprint([cell(1, 5), cell(2, 6)], direct);
    expect(row?.rates[0]?.p99AddedMs).toMatchObject({ min: 4, max: 5 });
  });

  it("with one round, is that round's direct", () => {
    const [row] = summarizeFootprint([cell(1, 5)], [{ round: 1, rates: [latency(2)] }]);
    expect(row?.rates[0]?.p99AddedMs.median).toBe(3);
  });

  it("leaves out a direct run that recorded nothing or failed more than 1 % of its requests", () => {
    const failed = { ...latency(0, 0, 0), p50Ms: 0, p999Ms: 0, typicalSecondP99Ms: 0 };
    const direct = [
      { round: 1, rates: [failed] },
      { round: 2, rates: [latency(8, 40_000, 1_000)] }, // 2.5 % errors
      { round: 3, rates: [latency(2)] },
    ];
    const [row] = summarizeFootprint([cell(1, 5), cell(2, 6), cell(3, 7)], direct);
    expect(row?.rates[0]?.p99AddedMs).toMatchObject({ min: 3, median: 4, max: 5 });
    expect(renderDirectLine(direct, [2000])).toBe(
      "Direct, p50 / p99 / p99.9 ms: 2000 req/s: round 1 failed (0 recorded, 0 errors; not a base); " +
        "round 2 failed (40000 recorded, 1000 errors; not a base); round 3 0.50 / 2.00 / 4.00.",
    );
  });

  it("never says met when every direct run stalled: a single round's stall is not judged", () => {
    const [row] = summarizeFootprint([cell(1, 5)], [{ round: 1, rates: [latency(170)] }]);
    const added = row?.rates[0]?.p99AddedMs;
    expect(added?.median).toBe(-165);
    expect(addedLatencyVerdict(added, 3)).toMatch(/^not judged/);
    expect(addedLatencyVerdict({ median: 2, min: 2, max: 2 }, 3)).toBe("met");
    expect(addedLatencyVerdict({ median: -0.5, min: -0.5, max: -0.5 }, 3)).toBe("met");
    expect(addedLatencyVerdict({ median: 4, min: 4, max: 4 }, 3)).toBe("NOT met");
  });

  it("with no usable direct run, shows no added figure rather than one against nothing", () => {
    const [row] = summarizeFootprint([cell(1, 5)], [{ round: 1, rates: [latency(0, 0)] }]);
    expect(row?.rates[0]?.p99AddedMs.median).toBeNull();
  });
});
