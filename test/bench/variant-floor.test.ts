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
  floorUs: number;
  addedUs: Spread;
  multiple: Spread;
  perCpu: Spread;
  ceiling: number | null;
  maxMultiple: number | null;
  inPlaceUs: Spread;
  inPlaceMultiple: Spread;
  inPlaceCeiling: number | null;
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

const row = (key: string, median: number) => ({ key, label: key, cpuUs: { median, min: median } });
const floors = {
  node: "v0.0.0",
  rounds: 5,
  scripts: { "feature-floor": { rounds: 5 }, "gate-floor": { rounds: 5 } },
  rows: {
    "dpop-es256": row("dpop-es256", 20),
    "tracing-ratio-0.1": row("tracing-ratio-0.1", 2),
    "pacing-open": row("pacing-open", 0.1),
    "pacing-limit": row("pacing-limit", 0.3),
    "caller-sa": row("caller-sa", 0.25),
    "caller-basic": row("caller-basic", 0.2),
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

    // Plain's median 50 µs: 50 / (50 + 20).
    expect(dpop.ceiling).toBeCloseTo(50 / 70, 6);
    expect(dpop.perCpu.median).toBeCloseTo(60 / 90, 6);

    const line = floorMarkdown(costs, floors)!;
    expect(line).toContain("bench/feature-floor.mjs 5 rounds, bench/gate-floor.mjs 5 rounds");
    expect(line).toContain("- dpop: floor 20.0 µs (dpop-es256), added 26.0 µs (24.0–30.0)");
    expect(line).toContain("1.30× the floor (1.20–1.50); ceiling 0.71×, measured 0.67× per CPU-s");
    expect(line).toContain("target ≤ 1.3×: PASS");
    expect(line).toContain("- tracing-sampled: floor 2.0 µs (tracing-ratio-0.1), added 2.5 µs");
  });

  it("sets the added CPU against the same code in the undici forwarder, round by round", () => {
    const withForwarder = [
      ...cells,
      cell("undici", 1, 40),
      cell("undici+dpop", 1, 52), // +12: bearer-proxy's +24 is 2×
      cell("undici", 2, 40),
      cell("undici+dpop", 2, 70), // +30: 1×
      cell("undici", 3, 40),
      cell("undici+dpop", 3, 66), // +26: 1×
    ];
    const dpop = floorCosts(withForwarder, variants, floors).find((c) => c.variant === "dpop")!;
    expect(dpop.inPlaceUs.median).toBeCloseTo(26, 6);
    expect(dpop.inPlaceUs.min).toBeCloseTo(12, 6);
    expect(dpop.inPlaceMultiple.median).toBeCloseTo(1, 6);
    expect(dpop.inPlaceMultiple.max).toBeCloseTo(2, 6);
    // Plain's median 50 µs: 50 / (50 + 26).
    expect(dpop.inPlaceCeiling).toBeCloseTo(50 / 76, 6);
    const line = floorMarkdown([dpop], floors)!;
    expect(line).toContain(
      "in place (undici forwarder + the same code, its added CPU over the forwarder): 26.0 µs (12.0–30.0), so bearer-proxy adds 1.00× that (1.00–2.00) and that floor's ceiling is 0.66×",
    );
    // Without the forwarder's cells the line says nothing about it.
    const without = floorCosts(cells, variants, floors).find((c) => c.variant === "dpop")!;
    expect(without.inPlaceUs.median).toBeNull();
    expect(floorMarkdown([without], floors)).not.toContain("in place");
  });

  describe("gate floors (bench/gate-floor.mjs rows)", () => {
    const gateCells = [
      cell("bearer-proxy", 1, 50),
      cell("bearer-proxy+rate-limit", 1, 51), // +1
      cell("bearer-proxy+callers-sa", 1, 53), // +3
      cell("bearer-proxy+sa-header-open", 1, 50.4), // +0.4
      cell("bearer-proxy+callers-basic", 1, 52), // +2
      cell("bearer-proxy+basic-header-open", 1, 51), // +1
      cell("bearer-proxy", 2, 50),
      cell("bearer-proxy+rate-limit", 2, 51),
      cell("bearer-proxy+callers-sa", 2, 53),
      cell("bearer-proxy+sa-header-open", 2, 50.6), // +0.6
      cell("bearer-proxy+callers-basic", 2, 52),
      cell("bearer-proxy+basic-header-open", 2, 51),
    ];
    const all = selectVariants([
      "callers-basic",
      "basic-header-open",
      "callers-sa",
      "sa-header-open",
      "rate-limit",
    ]);
    const costs = floorCosts(gateCells, all, floors);
    const cost = (key: string) => costs.find((c) => c.variant === key)!;

    it("takes a rate limit's floor less what plain pays at the same gate", () => {
      expect(cost("rate-limit").floorUs).toBeCloseTo(0.2, 6);
      expect(cost("rate-limit").multiple.median).toBeCloseTo(5, 6);
      expect(cost("rate-limit").ceiling).toBeCloseTo(50 / 50.2, 6);
    });

    it("adds each credential header's bytes, as its header-open variant measured them", () => {
      expect(cost("callers-sa").floorUs).toBeCloseTo(0.25 + 0.5, 6);
      expect(cost("callers-basic").floorUs).toBeCloseTo(0.2 + 1, 6);
      expect(cost("callers-basic").perCpu.median).toBeCloseTo(50 / 52, 6);
      // The header-open variants have no floor of their own: no line.
      expect(costs.map((c) => c.variant).sort()).toEqual([
        "callers-basic",
        "callers-sa",
        "rate-limit",
      ]);
      const without = floorCosts(
        gateCells.filter((c) => !c.competitor.endsWith("header-open")),
        all,
        floors,
      );
      expect(without.find((c) => c.variant === "callers-sa")!.floorUs).toBeCloseTo(0.25, 6);
      expect(without.find((c) => c.variant === "callers-basic")!.floorUs).toBeCloseTo(0.2, 6);
      expect(floorMarkdown(without, floors)).toContain("sa-header-open not run");
      expect(floorMarkdown(without, floors)).toContain("basic-header-open not run");
    });

    it("writes each floor with what it is made of and its ceiling against the target", () => {
      const text = floorMarkdown(costs, floors)!;
      expect(text).toContain(
        "- rate-limit: floor 0.20 µs (pacing-limit 0.30 − pacing-open 0.10), added 1.0 µs (1.0–1.0) on plain's 50.0 µs",
      );
      expect(text).toContain(
        "- callers-sa: floor 0.75 µs (caller-sa 0.25 + the header's bytes 0.50 (sa-header-open's added CPU))",
      );
      expect(text).toContain(
        "- callers-basic: floor 1.2 µs (caller-basic 0.20 + the header's bytes 1.0 (basic-header-open's added CPU)), added 2.0 µs",
      );
      expect(text).toContain(
        "ceiling 0.98×, measured 0.96× per CPU-s (0.96–0.96); target ≥ 0.97× (req/s): the floor allows it",
      );
      const dear = { ...floors, rows: { ...floors.rows, "caller-basic": row("caller-basic", 5) } };
      expect(floorMarkdown(floorCosts(gateCells, all, dear), dear)).toContain(
        "target ≥ 0.97× (req/s): the floor alone rules it out",
      );
    });
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
