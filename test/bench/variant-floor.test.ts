/**
 * Issue 33: the bench sets each variant's added CPU per request (its CPU minus plain
 * bearer-proxy's, within each round) against the floor of its feature, and judges DPoP on
 * that multiple. Synthetic cells: the arithmetic and the report line, not the machine.
 */
import { describe, expect, it } from "vitest";

interface Spread {
  median: number | null;
  min: number | null;
  max: number | null;
}
interface FloorCost {
  variant: string;
  addedUs: Spread;
  multiple: Spread;
  maxMultiple: number | null;
}
interface Check {
  limit: number;
  higherIsBetter: boolean;
  value(summary: unknown, token: unknown, competitor: string): number | null;
}
// bench/ is plain JavaScript without declarations: loaded by URL, typed here as used.
const bench = (path: string) => import(new URL(`../../bench/lib/${path}`, import.meta.url).href);
const { attachFloorCosts, floorCosts, floorMarkdown } = (await bench("variant-floor.mjs")) as {
  floorCosts(cells: unknown[], variants: unknown[], floors: unknown): FloorCost[];
  attachFloorCosts(summary: unknown, costs: FloorCost[]): void;
  floorMarkdown(costs: FloorCost[], floors: unknown): string | null;
};
const { selectVariants, variantChecks } = (await bench("variants.mjs")) as {
  selectVariants(keys: string[]): unknown[];
  variantChecks(variants: unknown[]): Check[];
};

/** CPU s per 10k requests: µs per request ÷ 100. */
const cell = (competitor: string, round: number, us: number) => ({
  case: "small",
  competitor,
  round,
  cpuSecondsPer10k: us / 100,
});

const floors = {
  node: "v0.0.0",
  rounds: 5,
  rows: {
    "dpop-es256": { key: "dpop-es256", label: "proof", cpuUs: { median: 20, min: 19 } },
    "tracing-ratio-0.1": { key: "tracing-ratio-0.1", label: "pair", cpuUs: { median: 2, min: 2 } },
  },
};

describe("variant floors", () => {
  const cells = [
    cell("bearer-proxy", 1, 50),
    cell("bearer-proxy+dpop", 1, 74), // +24
    cell("bearer-proxy+tracing-sampled", 1, 53), // +3
    cell("bearer-proxy", 2, 60),
    cell("bearer-proxy+dpop", 2, 90), // +30
    cell("bearer-proxy+tracing-sampled", 2, 62), // +2
    cell("bearer-proxy", 3, 40),
    cell("bearer-proxy+dpop", 3, 66), // +26
  ];
  const variants = selectVariants(["dpop", "tracing-sampled"]);

  it("takes the added CPU within each round and divides by the floor's median", () => {
    const costs = floorCosts(cells, variants, floors);
    const dpop = costs.find((c) => c.variant === "dpop")!;
    expect(dpop.addedUs.median).toBeCloseTo(26, 6);
    expect(dpop.addedUs.min).toBeCloseTo(24, 6);
    expect(dpop.addedUs.max).toBeCloseTo(30, 6);
    expect(dpop.multiple.median).toBeCloseTo(1.3, 6);
    expect(dpop.maxMultiple).toBe(1.3);
    const sampled = costs.find((c) => c.variant === "tracing-sampled")!;
    expect(sampled.addedUs.median).toBeCloseTo(2.5, 6);
    expect(sampled.multiple.median).toBeCloseTo(1.25, 6);

    const line = floorMarkdown(costs, floors)!;
    expect(line).toContain("- dpop: floor 20.0 µs (dpop-es256), added 26.0 µs (24.0–30.0)");
    expect(line).toContain("1.30× the floor (1.20–1.50); target ≤ 1.3×: PASS");
    expect(line).toContain("- tracing-sampled: floor 2.0 µs (tracing-ratio-0.1), added 2.5 µs");
  });

  it("judges DPoP on the multiple, the tracing variants on req/s", () => {
    const summary = {
      small: {
        "bearer-proxy": {},
        "bearer-proxy+dpop": {},
        "bearer-proxy+tracing-sampled": {
          rpsVsBearerProxy: { median: 0.96 },
          perCpuVsBearerProxy: { median: 0.95 },
        },
      },
    };
    attachFloorCosts(summary, floorCosts(cells, variants, floors));
    const [dpop, sampled] = variantChecks(variants);
    expect(dpop!.limit).toBe(1.3);
    expect(dpop!.higherIsBetter).toBe(false);
    expect(dpop!.value(summary, null, "bearer-proxy")).toBeCloseTo(1.3, 6);
    expect(sampled!.limit).toBe(0.95);
    expect(sampled!.value(summary, null, "bearer-proxy")).toBe(0.96);
  });

  it("says nothing when no floor was measured", () => {
    expect(floorCosts(cells, variants, null)).toEqual([]);
    expect(floorMarkdown([], null)).toBeNull();
  });
});
