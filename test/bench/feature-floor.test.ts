/**
 * bench/feature-floor.mjs keeps working: one short round of every row (DPoP proofs, bare
 * signatures, the traced span pair over OTLP protobuf and JSON, sampled and not) through the
 * built dist/, and its JSON line carries a positive cost and a ceiling for each. The figures
 * themselves are not asserted (the machine is shared).
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
const ROWS = [
  "dpop-es256",
  "dpop-eddsa",
  "dpop-ps256",
  "sign-es256",
  "sign-es256-p1363",
  "sign-ed25519",
  "tracing-protobuf",
  "tracing-json",
  "tracing-ratio-0.1",
];

interface Row {
  key: string;
  cpuUs: { min: number; median: number };
  wallUs: { min: number; median: number };
  ceilings: Record<string, number>;
  spans?: { made: number; exported: number; sampled: number; backlogWatched: boolean };
  added?: { us: number; multiple: number };
}

describe("bench/feature-floor.mjs", () => {
  it("prints one JSON line with a positive cost per row", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        "bench/feature-floor.mjs",
        "--rounds",
        "1",
        "--iterations",
        "2000",
        "--warmup",
        "200",
        "--plain-us",
        "50",
        "--added-us",
        "dpop=30,tracing=12",
        "--json",
      ],
      { cwd: REPO_ROOT, timeout: 20_000 },
    );
    const lines = stdout.trim().split("\n");
    expect(lines).toHaveLength(1);
    const result = JSON.parse(lines[0] ?? "") as { node: string; rows: Row[] };
    expect(result.node).toBe(process.version);
    expect(result.rows.map((r) => r.key)).toEqual(ROWS);
    for (const row of result.rows) {
      expect(row.cpuUs.min, row.key).toBeGreaterThan(0);
      expect(row.cpuUs.median, row.key).toBeGreaterThan(0);
      expect(row.wallUs.median, row.key).toBeGreaterThan(0);
      expect(row.ceilings["50"], row.key).toBeGreaterThan(0);
      expect(row.ceilings["50"], row.key).toBeLessThan(1);
    }
    // Every always-sampled span reached the sink: nothing dropped and left uncounted.
    for (const row of result.rows.filter((r) => r.spans?.sampled === 1)) {
      expect(row.spans?.exported, row.key).toBe(row.spans?.made);
    }
    // The loop sees the batch processor's queue (behind the processor that counts its drops),
    // so it waits for the exporter instead of letting spans drop.
    for (const row of result.rows.filter((r) => r.spans)) {
      expect(row.spans?.backlogWatched, row.key).toBe(true);
    }
    // Issue 33: a feature's added CPU in the proxy against each of its rows.
    const dpop = result.rows.find((r) => r.key === "dpop-es256");
    expect(dpop?.added?.us).toBe(30);
    expect(dpop?.added?.multiple).toBeCloseTo(30 / (dpop?.cpuUs.median ?? 1), 6);
    expect(result.rows.find((r) => r.key === "tracing-ratio-0.1")?.added?.us).toBe(12);
  }, 30_000);
});
