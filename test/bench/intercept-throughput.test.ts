/**
 * bench/intercept-throughput.mjs keeps working: one short round of each case (plain, and through
 * a kept-alive terminated CONNECT; each also with a new connection per request) against the
 * built dist/ and the Node upstream (no nginx needed); every cell had its token injected (else
 * the script exits 1). The figures themselves are not asserted (the machine is shared).
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

describe("bench/intercept-throughput.mjs", () => {
  it("prints a table with a req/s and a CPU figure for each case", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        "bench/intercept-throughput.mjs",
        ...["--rounds", "1", "--duration", "1", "--warmup", "0"],
        ...["--connections", "10", "--upstream", "node"],
      ],
      { cwd: REPO_ROOT, timeout: 90_000 },
    );
    const rows = stdout.split("\n").filter((line) => /^\| (plain|https)/.test(line));
    expect(rows).toHaveLength(4);
    for (const row of rows) {
      const cells = row.split("|").map((cell) => cell.trim());
      // req/s (with its spread), CPU ms per request and capacity are positive numbers.
      expect(Number.parseFloat(cells[3] ?? ""), row).toBeGreaterThan(0);
      expect(Number.parseFloat(cells[4] ?? ""), row).toBeGreaterThan(0);
      expect(Number.parseFloat(cells[5] ?? ""), row).toBeGreaterThan(0);
    }
  }, 120_000);
});
