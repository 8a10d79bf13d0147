/**
 * Turn the raw cells of all rounds into per-case, per-competitor summaries: medians with
 * min–max, and ratios taken within each round (interleaving makes same-round ratios the
 * steadiest figure on a shared machine) and then reduced to their median.
 */

/** Median of the finite numbers in `values`, or null. */
export function median(values) {
  const sorted = values
    .filter((v) => typeof v === "number" && Number.isFinite(v))
    .sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** `{median, min, max}` of the finite numbers in `values` (nulls when none). */
export function spread(values) {
  const finite = values.filter((v) => typeof v === "number" && Number.isFinite(v));
  if (finite.length === 0) return { median: null, min: null, max: null };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite) };
}

/**
 * `spread` of `compare(a, b)` over the rounds where both `competitor` (a) and `reference` (b)
 * measured `field`; a comparison that returns null is left out.
 */
function comparedWithin(cells, competitor, reference, field, compare) {
  const rounds = new Set(cells.map((c) => c.round));
  const values = [];
  for (const round of rounds) {
    const a = cells.find((c) => c.round === round && c.competitor === competitor)?.[field];
    const b = cells.find((c) => c.round === round && c.competitor === reference)?.[field];
    if (typeof a === "number" && typeof b === "number") values.push(compare(a, b));
  }
  return spread(values);
}

function ratiosWithin(cells, competitor, reference, field) {
  return comparedWithin(cells, competitor, reference, field, (a, b) => (b > 0 ? a / b : null));
}

function differencesWithin(cells, competitor, reference, field) {
  return comparedWithin(cells, competitor, reference, field, (a, b) => a - b);
}

function inverse(s) {
  if (s.median === null) return s;
  return { median: 1 / s.median, min: 1 / s.max, max: 1 / s.min };
}

/**
 * Summaries keyed `[caseKey][competitorKey]`: rps, p50, p99, CPU/10k, peak RSS, ratios to
 * nginx and to the undici forwarder (req/s and CPU), and latency added over direct.
 */
export function summarize(cells, competitorKeys) {
  const byCase = {};
  for (const caseKey of new Set(cells.map((c) => c.case))) {
    const caseCells = cells.filter((c) => c.case === caseKey);
    byCase[caseKey] = {};
    for (const key of competitorKeys) {
      const own = caseCells.filter((c) => c.competitor === key);
      if (own.length === 0) continue;
      byCase[caseKey][key] = {
        rounds: own.length,
        rps: spread(own.map((c) => c.rps)),
        p50Ms: spread(own.map((c) => c.p50Ms)),
        p99Ms: spread(own.map((c) => c.p99Ms)),
        cpuSecondsPer10k: spread(own.map((c) => c.cpuSecondsPer10k)),
        peakRssMiB: spread(own.map((c) => c.peakRssMiB)),
        rpsVsNginx: ratiosWithin(caseCells, key, "nginx", "rps"),
        rpsVsUndici: ratiosWithin(caseCells, key, "undici", "rps"),
        cpuVsNginx: ratiosWithin(caseCells, key, "nginx", "cpuSecondsPer10k"),
        // Requests per CPU-second relative to the reference: the inverse CPU ratio, steadier
        // than req/s when other work on the machine steals the proxy core.
        perCpuVsNginx: inverse(ratiosWithin(caseCells, key, "nginx", "cpuSecondsPer10k")),
        perCpuVsUndici: inverse(ratiosWithin(caseCells, key, "undici", "cpuSecondsPer10k")),
        // bearer-proxy over HTTP/2 against itself over HTTP/1.1, same round.
        rpsVsBearerProxy: ratiosWithin(caseCells, key, "bearer-proxy", "rps"),
        perCpuVsBearerProxy: inverse(
          ratiosWithin(caseCells, key, "bearer-proxy", "cpuSecondsPer10k"),
        ),
        upstreamConnections: spread(own.map((c) => c.upstreamConnections)),
        upstreamHandshakes: spread(own.map((c) => c.upstreamHandshakes)),
        addedP50Ms: differencesWithin(caseCells, key, "direct", "p50Ms"),
        addedP99Ms: differencesWithin(caseCells, key, "direct", "p99Ms"),
        typicalSecondP99Ms: spread(own.map((c) => c.typicalSecondP99Ms)),
        addedTypicalSecondP99Ms: differencesWithin(caseCells, key, "direct", "typicalSecondP99Ms"),
      };
    }
  }
  return byCase;
}
