/**
 * A feature's cost in the proxy against its floor, in one run (issue 33): after the matrix the
 * bench runs the floor scripts (the same Node, the same build, pinned to the proxy's core, the
 * proxies idle) for the rows the variants name (`floor` in lib/variants.mjs):
 * `bench/feature-floor.mjs` (DPoP's proof, tracing's span pair; one process for all its rows)
 * and `bench/gate-floor.mjs` (the pacing and caller gates; a process per row). Each variant's
 * *added CPU per request* — its CPU µs per request minus plain bearer-proxy's, taken within
 * each round — is set against the floor row's median CPU µs: the multiple is what the proxy
 * pays around the feature's own work (garbage, copies, runtime). The ceiling plain ÷ (plain +
 * floor) is the best ratio the feature's own work allows, so a ratio below its target reads as
 * the feature (ceiling below the target too) or the proxy around it (ceiling above).
 */
import { once } from "node:events";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnPinned } from "./processes.mjs";
import { median } from "./summarize.mjs";
import {
  floorSpec,
  inPlaceCompetitorKey,
  PLAIN,
  VARIANT_CASE,
  variantCompetitorKey,
} from "./variants.mjs";

const BENCH_DIR = join(dirname(fileURLToPath(import.meta.url)), "..");

/** How each floor script is run: normal and smoke (the line must work, its figure means nothing). */
const SCRIPTS = {
  "feature-floor": {
    args: (rows) => ["--only", rows.join(","), "--json"],
    rounds: ["--rounds", "5"],
    smoke: ["--rounds", "1", "--iterations", "500"],
  },
  "gate-floor": {
    args: (rows) => ["--only", rows.join(","), "--json"],
    rounds: ["--rounds", "5"],
    smoke: ["--rounds", "1", "--iterations", "2000"],
  },
};

async function runScript(script, rows, { core, smoke, log, problems }) {
  const { args, rounds, smoke: smokeArgs } = SCRIPTS[script];
  log(`${script} (${rows.join(", ")}) on core ${core ?? "any"}`);
  const path = join(BENCH_DIR, `${script}.mjs`);
  const child = spawnPinned(
    core,
    process.execPath,
    [path, ...args(rows), ...(smoke ? smokeArgs : rounds)],
    { env: process.env },
  );
  let stdout = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
  });
  const [code] = await once(child, "exit");
  if (code !== 0) {
    problems.push(`${script}.mjs exited ${code}: ${child.stderrText.trim().slice(-500)}`);
    return null;
  }
  try {
    return JSON.parse(stdout.trim().split("\n").pop());
  } catch (error) {
    problems.push(`${script}.mjs printed no JSON: ${error.message}`);
    return null;
  }
}

/**
 * Runs each floor script for the rows of `variants`; resolves with
 * `{node, rounds, scripts: {name: {rounds, …}}, rows}` (rows keyed by `key`, each with its
 * `script`) or null when no variant names a floor or none could be measured. A failure is a
 * problem of the run, not an exception: the report then says the floor was not measured.
 */
export async function measureFloors({ variants, core, smoke, log, problems }) {
  const wanted = {};
  for (const spec of variants.map(floorSpec).filter(Boolean)) {
    wanted[spec.script] ??= new Set();
    wanted[spec.script].add(spec.row);
    if (spec.minus) wanted[spec.script].add(spec.minus);
  }
  const scripts = {};
  const rows = {};
  for (const [script, names] of Object.entries(wanted)) {
    const result = await runScript(script, [...names], { core, smoke, log, problems });
    if (!result) continue;
    const { rows: own, ...meta } = result;
    scripts[script] = meta;
    for (const row of own) rows[row.key] = { ...row, script };
  }
  const measured = Object.values(scripts);
  if (measured.length === 0) return null;
  return { node: measured[0].node, rounds: measured[0].rounds, scripts, rows };
}

function spreadOf(values) {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return { median: null, min: null, max: null };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite) };
}

/** The variant's added CPU µs per request in each round both it and plain ran. */
function addedPerRound(small, variantKey) {
  return addedOver(small, variantCompetitorKey(variantKey), PLAIN);
}

/** CPU µs per request `key` adds over `reference`, per round both ran: `{round, us, a, b}`. */
function addedOver(small, key, reference) {
  const added = [];
  for (const round of new Set(small.map((c) => c.round))) {
    const own = small.find((c) => c.round === round && c.competitor === key);
    const plain = small.find((c) => c.round === round && c.competitor === reference);
    const a = own?.cpuSecondsPer10k;
    const b = plain?.cpuSecondsPer10k;
    // s per 10k requests × 100 = µs per request.
    if (typeof a === "number" && typeof b === "number")
      added.push({ round, us: (a - b) * 100, a, b });
  }
  return added;
}

/**
 * The floor µs of `spec` from the measured rows: its row less `minus`, plus what
 * `plusVariant` added in this run (at least 0: a header that costs nothing is no discount).
 * `parts` says what went in, for the report; null when a row was not measured.
 */
function floorOf(spec, floors, small) {
  const row = floors.rows[spec.row];
  if (!row) return null;
  let floorUs = row.cpuUs.median;
  const parts = { row: spec.row, rowUs: floorUs };
  if (spec.minus) {
    const minus = floors.rows[spec.minus];
    if (!minus) return null;
    parts.minus = spec.minus;
    parts.minusUs = minus.cpuUs.median;
    floorUs -= minus.cpuUs.median;
  }
  if (spec.plusVariant) {
    parts.plusVariant = spec.plusVariant;
    const added = addedPerRound(small, spec.plusVariant).map((r) => r.us);
    // Not run: the header's bytes are left out, and the report says so.
    parts.plusUs = added.length > 0 ? median(added) : null;
    if (parts.plusUs !== null) floorUs += Math.max(0, parts.plusUs);
  }
  return { floorUs, label: row.label, parts };
}

/**
 * Per variant with a floor: `{ variant, row, label, floorUs, parts, plainUs, addedUs, multiple,
 * ceiling, perCpu, maxMultiple, minRatio }`, the added µs, the multiple and the per-CPU ratio
 * (plain's CPU per request ÷ the variant's) as median/min/max over the rounds both cells ran
 * in; `ceiling` is plain ÷ (plain + floor) at plain's median CPU per request.
 */
export function floorCosts(cells, variants, floors) {
  if (!floors) return [];
  const small = cells.filter((c) => c.case === VARIANT_CASE);
  const results = [];
  for (const variant of variants) {
    const spec = floorSpec(variant);
    if (!spec) continue;
    const floor = floorOf(spec, floors, small);
    if (!floor) continue;
    const { floorUs } = floor;
    const added = addedPerRound(small, variant.key);
    const plainUs = spreadOf(
      small.filter((c) => c.competitor === PLAIN).map((c) => c.cpuSecondsPer10k * 100),
    );
    // In place: what the undici forwarder pays for the same code (when it ran), and the
    // variant's added CPU as a multiple of that, round by round.
    const inPlace = addedOver(small, inPlaceCompetitorKey(variant.key), "undici");
    const inPlaceUs = spreadOf(inPlace.map((r) => r.us));
    const inPlaceMultiple = spreadOf(
      added.map((r) => r.us / (inPlace.find((p) => p.round === r.round)?.us ?? Number.NaN)),
    );
    results.push({
      variant: variant.key,
      inPlaceUs,
      inPlaceMultiple,
      inPlaceCeiling:
        plainUs.median === null || inPlaceUs.median === null
          ? null
          : plainUs.median / (plainUs.median + inPlaceUs.median),
      row: spec.row,
      label: floor.label,
      floorUs,
      parts: floor.parts,
      plainUs,
      addedUs: spreadOf(added.map((r) => r.us)),
      multiple: spreadOf(added.map((r) => r.us / floorUs)),
      ceiling: plainUs.median === null ? null : plainUs.median / (plainUs.median + floorUs),
      perCpu: spreadOf(added.map((r) => r.b / r.a)),
      maxMultiple: variant.maxFloorMultiple ?? null,
      minRatio: variant.minRatio ?? null,
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

// Two decimals below 1 µs: a gate's floor is a tenth of a µs.
const us = (v) => (v === null ? "—" : v.toFixed(Math.abs(v) < 1 ? 2 : 1));
const x = (v) => (v === null ? "—" : `${v.toFixed(2)}×`);
const range = (s, f) => (s.min === null ? "—" : `${f(s.min)}–${f(s.max)}`);

/** What the floor is made of: `20.0 µs (dpop-es256)`, `0.1 µs (pacing-limit 0.2 − pacing-open 0.1)`. */
function floorText(c) {
  const p = c.parts;
  let what = p.minus ? `${p.row} ${us(p.rowUs)} − ${p.minus} ${us(p.minusUs)}` : p.row;
  if (p.plusVariant) {
    what +=
      p.plusUs === null
        ? `; ${p.plusVariant} not run: the header's bytes not counted`
        : ` ${us(p.rowUs)} + the header's bytes ${us(p.plusUs)} (${p.plusVariant}'s added CPU${p.plusUs < 0 ? ", counted as 0" : ""})`;
  }
  return `${us(c.floorUs)} µs (${what})`;
}

/** Its targets: the multiple's verdict, or the req/s target set against the ceiling. */
function targetText(c) {
  if (c.maxMultiple !== null) {
    const pass = c.multiple.median !== null && c.multiple.median <= c.maxMultiple;
    return `; target ≤ ${c.maxMultiple}×: ${pass ? "PASS" : "FAIL"}`;
  }
  if (c.minRatio === null || c.ceiling === null) return "";
  return c.ceiling < c.minRatio
    ? `; target ≥ ${c.minRatio}× (req/s): the floor alone rules it out`
    : `; target ≥ ${c.minRatio}× (req/s): the floor allows it`;
}

/** The floor in place, when the undici forwarder ran with the feature's code. */
function inPlaceText(c) {
  if (c.inPlaceUs.median === null) return "";
  return (
    `; in place (undici forwarder + the same code, its added CPU over the forwarder): ` +
    `${us(c.inPlaceUs.median)} µs (${range(c.inPlaceUs, us)}), so bearer-proxy adds ` +
    `${c.inPlaceMultiple.median === null ? "—" : c.inPlaceMultiple.median.toFixed(2)}× that ` +
    `(${range(c.inPlaceMultiple, (v) => v.toFixed(2))}) and that floor's ceiling is ${x(c.inPlaceCeiling)}`
  );
}

/**
 * One line per feature: its floor, the added CPU per request and its multiple of the floor, the
 * ceiling the floor implies against the per-CPU ratio measured, and its target.
 */
export function floorMarkdown(costs, floors) {
  if (!floors) return null;
  const scripts = Object.entries(floors.scripts)
    .map(([name, meta]) => `bench/${name}.mjs ${meta.rounds} rounds`)
    .join(", ");
  const lines = [
    `Floors (${scripts}; ${floors.node}, this build, pinned like the proxy, in this run: CPU µs ` +
      "of one request's worth of the feature in a loop) against each variant's added CPU per " +
      "request (its CPU µs per request minus plain bearer-proxy's, within each round; median, " +
      "min–max), and the ceiling the floor implies, plain ÷ (plain + floor) at plain's CPU per " +
      "request, beside the ratio measured per CPU-s:",
    "",
  ];
  for (const c of costs) {
    lines.push(
      `- ${c.variant}: floor ${floorText(c)}, added ${us(c.addedUs.median)} µs ` +
        `(${range(c.addedUs, us)}) on plain's ${us(c.plainUs.median)} µs: ` +
        `${c.multiple.median === null ? "—" : c.multiple.median.toFixed(2)}× the floor ` +
        `(${range(c.multiple, (v) => v.toFixed(2))}); ceiling ${x(c.ceiling)}, measured ` +
        `${x(c.perCpu.median)} per CPU-s (${range(c.perCpu, (v) => v.toFixed(2))})${targetText(c)}` +
        inPlaceText(c),
    );
  }
  return lines.join("\n");
}
