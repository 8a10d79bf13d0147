/**
 * One cell of the matrix: one competitor, one case, one round. Runs the load, and around it
 * reads the proxy's CPU time and samples its RSS, and asks the upstream how many requests
 * arrived with and without a bearer token.
 */
import { runClosedLoop, runFixedRate } from "./generators.mjs";
import { readCpuSeconds, sampleRss } from "./processes.mjs";

const MIB = 1024 * 1024;

/** The throughput cases (closed loop). */
export const THROUGHPUT_CASES = [
  {
    key: "small",
    label: "small GET (~100 B JSON)",
    method: "GET",
    path: "/small",
    bodyBytes: 0,
    status: "2xx",
  },
  {
    key: "post64k",
    label: "64 KiB POST, upstream reads the body",
    method: "POST",
    path: "/read",
    bodyBytes: 65536,
    status: "2xx",
  },
  {
    key: "early",
    label: "64 KiB POST answered early (401, body unread)",
    method: "POST",
    path: "/early",
    bodyBytes: 65536,
    status: "401",
  },
  { key: "get1m", label: "1 MiB GET", method: "GET", path: "/1m", bodyBytes: 0, status: "2xx" },
];

/** The fixed-rate latency case. */
export const LATENCY_CASE = { key: "latency", label: "fixed rate GET /small", path: "/small" };

/**
 * Wait until the upstream's request count stops moving (requests a proxy still had in flight
 * when the previous cell's load stopped), so they are not counted against the next competitor.
 */
async function quiesce(upstream, { stableMs = 300, timeoutMs = 3000 } = {}) {
  const started = performance.now();
  let last = (await upstream.stats({ settle: false })).total;
  while (performance.now() - started < timeoutMs) {
    // Longer than nginx's access log flush interval, so a quiet log means quiet traffic.
    await new Promise((resolve) => setTimeout(resolve, stableMs));
    const { total } = await upstream.stats({ settle: false });
    if (total === last) return;
    last = total;
  }
}

/**
 * Measure one cell. `problems` collects real breakage (no successful request, missing
 * injection, errors) as strings; the cell is returned either way.
 */
export async function measureCell({ competitor, caseDef, round, settings, upstream, certs }) {
  await quiesce(upstream);
  await upstream.reset();
  const measured = competitor.key !== "direct";
  const pids = () => (measured ? competitor.pids() : []);
  const cpuBefore = readCpuSeconds(pids());
  const rss = sampleRss(pids);
  const url = `${competitor.baseUrl}${caseDef.path}`;
  let load;
  let loadError = null;
  let peakRssBytes = 0;
  try {
    load =
      caseDef.key === LATENCY_CASE.key
        ? await runFixedRate({
            core: settings.loadCore,
            url,
            rate: settings.rate,
            durationS: settings.latencyDurationS,
            warmupS: settings.latencyWarmupS,
            caFile: certs.caFile,
          })
        : await runClosedLoop({
            tool: settings.generator,
            core: settings.loadCore,
            url,
            method: caseDef.method,
            bodyBytes: caseDef.bodyBytes,
            connections: settings.connections,
            durationS: settings.durationS,
            caFile: certs.caFile,
            // A variant's credential (lib/variants.mjs); none for the others.
            headers: competitor.headers,
          });
  } catch (error) {
    loadError = error.message;
    load = { rps: 0, requests: 0, p50Ms: null, p99Ms: null, errors: 0, statusErrors: 0 };
  } finally {
    peakRssBytes = rss.stop();
  }
  const cpuSeconds = readCpuSeconds(pids()) - cpuBefore;
  const seen = await upstream.stats();
  const cell = {
    round,
    case: caseDef.key,
    competitor: competitor.key,
    rps: load.rps,
    requests: load.requests,
    p50Ms: load.p50Ms,
    p99Ms: load.p99Ms,
    ...(load.typicalSecondP99Ms === undefined
      ? {}
      : { typicalSecondP99Ms: load.typicalSecondP99Ms }),
    errors: load.errors,
    statusErrors: load.statusErrors,
    cpuSecondsPer10k: measured && load.requests > 0 ? (cpuSeconds / load.requests) * 10_000 : null,
    peakRssMiB: measured ? peakRssBytes / MIB : null,
    upstream: seen,
    // TLS connections the upstream served requests on, and opened, during the cell (nginx only).
    upstreamConnections: seen.connections ?? null,
    upstreamHandshakes: seen.handshakes ?? null,
    problems: [],
  };
  if (loadError)
    cell.problems.push(
      `${caseDef.key}/${competitor.key} round ${round}: load generator failed: ${loadError}`,
    );
  checkCell(cell, competitor, caseDef);
  return cell;
}

function checkCell(cell, competitor, caseDef) {
  const where = `${caseDef.key}/${competitor.key} round ${cell.round}`;
  if (competitor.isDead()) cell.problems.push(`${where}: the process died`);
  if (cell.requests === 0) cell.problems.push(`${where}: no request completed`);
  const good = caseDef.status === "401" ? cell.statusErrors : cell.requests - cell.statusErrors;
  if (cell.requests > 0 && good < cell.requests * 0.99) {
    cell.problems.push(
      `${where}: only ${good} of ${cell.requests} answers had status ${caseDef.status ?? "2xx"}`,
    );
  }
  if (cell.errors > Math.max(10, cell.requests * 0.01)) {
    cell.problems.push(`${where}: ${cell.errors} socket errors or timeouts`);
  }
  if (competitor.injects) {
    if (cell.upstream.plain > 0 || cell.upstream.bearer === 0) {
      cell.problems.push(
        `${where}: injection missing — upstream saw ${cell.upstream.bearer} with a bearer token, ${cell.upstream.plain} without`,
      );
    }
  }
}
