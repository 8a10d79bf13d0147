/**
 * bench/gate-floor.mjs keeps working: one short round of each row (the open and the limited
 * pacing gate, the caller gate for a cached service account and for a cached Basic user)
 * through the built dist/, one line per row with a positive figure, and the JSON bench/run.mjs
 * reads. The figures themselves are not asserted (the machine is shared).
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("bench/gate-floor.mjs", () => {
  it("prints a positive ns per request for every row", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["bench/gate-floor.mjs", "--rounds", "1", "--iterations", "2000"],
      { cwd: REPO_ROOT, timeout: 60_000 },
    );
    for (const row of ["pacing-open", "pacing-limit", "caller-sa", "caller-basic"]) {
      const match = new RegExp(`^${row} +(\\d+) ns median`, "m").exec(stdout);
      expect(match, stdout).not.toBeNull();
      expect(Number(match![1])).toBeGreaterThan(0);
    }
    expect(stdout).not.toContain("nothing ran");
  }, 90_000);

  it("prints the rows --only names as one JSON line with --json", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        "bench/gate-floor.mjs",
        "--rounds",
        "1",
        "--iterations",
        "2000",
        "--only",
        "caller-basic,pacing-open",
        "--json",
      ],
      { cwd: REPO_ROOT, timeout: 60_000 },
    );
    const result = JSON.parse(stdout.trim());
    expect(result.node).toBe(process.version);
    expect(result.rows.map((r: { key: string }) => r.key)).toEqual(["caller-basic", "pacing-open"]);
    for (const row of result.rows) {
      expect(row.cpuUs.median).toBeGreaterThan(0);
      expect(row.wallUs.median).toBeGreaterThan(0);
    }
  }, 90_000);
});
