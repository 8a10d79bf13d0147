/**
 * A feature's cost in the proxy against its floor, in one run (issue 33): after the matrix the
 * bench runs `bench/feature-floor.mjs` (the same Node, the same build, pinned to the proxy's
 * core, the proxies idle) for the rows the variants name (`floor` in lib/variants.mjs), and
 * sets each variant's *added CPU per request* — its CPU µs per request minus plain
 * bearer-proxy's, taken within each round — against the floor row's median CPU µs: the
 * multiple is what the proxy pays around the feature's own work (garbage, copies, runtime).
 */
import { once } from "node:events";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnPinned } from "./processes.mjs";
import { median } from "./summarize.mjs";
import { PLAIN, VARIANT_CASE, variantCompetitorKey } from "./variants.mjs";

const FLOOR_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), "..", "feature-floor.mjs");

/**
 * Runs feature-floor.mjs for the floor rows of `variants`; resolves with its JSON (rows keyed
 * by `key`) or null when no variant names a floor. A failure is a problem of the run, not an
 * exception: the report then says the floor was not measured.
 */
export async function measureFloors({ variants, core, smoke, log, problems }) {
  const rows = [...new Set(variants.map((v) => v.floor).filter(Boolean))];
  if (rows.length === 0) return null;
  const args = [FLOOR_SCRIPT, "--only", rows.join(","), "--json"];
  // Smoke: the line must work, its figure means nothing.
  args.push(...(smoke ? ["--rounds", "1", "--iterations", "500"] : ["--rounds", "5"]));
  log(`feature floors (${rows.join(", ")}) on core ${core ?? "any"}`);
  const child = spawnPinned(core, process.execPath, args, { env: process.env });
  let stdout = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
  });
  const [code] = await once(child, "exit");
  if (code !== 0) {
    problems.push(`feature-floor.mjs exited ${code}: ${child.stderrText.trim().slice(-500)}`);
    return null;
  }
  try {
    const result = JSON.parse(stdout.trim().split("\n").pop());
    return { ...result, rows: Object.fromEntries(result.rows.map((r) => [r.key, r])) };
  } catch (error) {
    problems.push(`feature-floor.mjs printed no JSON: ${error.message}`);
    return null;
  }
}

function spreadOf(values) {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return { median: null, min: null, max: null };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite) };
}

/**
 * Per variant with a floor: `{ variant, row, floorUs, addedUs, multiple, maxMultiple }`, the
 * added µs and the multiple as median/min/max over the rounds both cells ran in.
 */
export function floorCosts(cells, variants, floors) {
  if (!floors) return [];
  const small = cells.filter((c) => c.case === VARIANT_CASE);
  const results = [];
  for (const variant of variants) {
    const row = floors.rows[variant.floor];
    if (!row) continue;
    const floorUs = row.cpuUs.median;
    const key = variantCompetitorKey(variant.key);
    const added = [];
    for (const round of new Set(small.map((c) => c.round))) {
      const own = small.find((c) => c.round === round && c.competitor === key);
      const plain = small.find((c) => c.round === round && c.competitor === PLAIN);
      const a = own?.cpuSecondsPer10k;
      const b = plain?.cpuSecondsPer10k;
      // s per 10k requests × 100 = µs per request.
      if (typeof a === "number" && typeof b === "number") added.push((a - b) * 100);
    }
    const addedUs = spreadOf(added);
    results.push({
      variant: variant.key,
      row: variant.floor,
      label: row.label,
      floorUs,
      plainUs: spreadOf(
        small.filter((c) => c.competitor === PLAIN).map((c) => c.cpuSecondsPer10k * 100),
      ),
      addedUs,
      multiple: spreadOf(added.map((us) => us / floorUs)),
      maxMultiple: variant.maxFloorMultiple ?? null,
    });
  }
  return results;
}

/** Puts each variant's floor cost into the summary, where variantChecks reads it. */
export function attachFloorCosts(summary, costs) {
  for (const cost of costs) {
    const own = summary[VARIANT_CASE]?.[variantCompetitorKey(cost.variant)];
    if (own) own.floorCost = cost;
  }
}

const us = (v) => (v === null ? "—" : v.toFixed(1));

/** One line per feature: floor, added CPU per request, the multiple and its target. */
export function floorMarkdown(costs, floors) {
  if (!floors) return null;
  const lines = [
    `Feature floors (bench/feature-floor.mjs, ${floors.rounds} rounds, ${floors.node}, pinned ` +
      "like the proxy, in this run) against each variant's added CPU per request (its CPU µs " +
      "per request minus plain bearer-proxy's, within each round; median, min–max):",
    "",
  ];
  for (const c of costs) {
    const target =
      c.maxMultiple === null
        ? ""
        : `; target ≤ ${c.maxMultiple}×: ${c.multiple.median !== null && c.multiple.median <= c.maxMultiple ? "PASS" : "FAIL"}`;
    lines.push(
      `- ${c.variant}: floor ${us(c.floorUs)} µs (${c.row}), added ${us(c.addedUs.median)} µs ` +
        `(${us(c.addedUs.min)}–${us(c.addedUs.max)}) on plain's ${us(c.plainUs.median)} µs: ` +
        `${c.multiple.median === null ? "—" : c.multiple.median.toFixed(2)}× the floor ` +
        `(${c.multiple.min === null ? "—" : `${c.multiple.min.toFixed(2)}–${c.multiple.max.toFixed(2)}`})${target}`,
    );
  }
  return lines.join("\n");
}
