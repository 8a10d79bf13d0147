/**
 * Issue 33: the footprint's latency "added" is over the direct path, which is measured once per
 * round, minutes before some of the cells. A stall during one round's direct run (p99 170 ms, seen
 * on this VM) must not make every cell of that round read a negative "added" and pass its target.
 */
import { describe, expect, it } from "vitest";

const { summarizeFootprint } = (await import(
  new URL("../../bench/footprint.mjs", import.meta.url).href
)) as {
  summarizeFootprint: (
    cells: unknown[],
    direct: unknown[],
  ) => { rates: { p99AddedMs: { median: number; min: number; max: number } }[] }[];
};

const latency = (p99Ms: number) => ({
  rate: 2000,
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
});
