/**
 * What CONNECT interception costs (issue 34): one small GET through one bearer-proxy process,
 *   - `plain`: sent as plain HTTP (`GET http://<proxy>/small`), the reverse-proxy way;
 *   - `intercepted`: sent to `https://localhost:<upstream>/small` through the proxy with undici's
 *     ProxyAgent: CONNECT, TLS to the proxy's leaf (trusting the interception CA), the request
 *     inside; the tunnels are kept alive, as for `plain` the connections;
 *   - `plain-per-request` and `tunnel-per-request`: each with a new connection (tunnel) for every
 *     request — what a curl in a loop pays: TCP, and for the tunnel CONNECT and a full TLS
 *     handshake each time; fewer connections, shorter cells;
 * in interleaved rounds, reporting req/s and the proxy's CPU per request (utime + stime from
 * /proc; the steadier figure) and their ratios, taken within each round, to the plain case of
 * the same kind. The layout is bench/run.mjs's:
 * the proxy alone on core 0 (`taskset`), the HTTPS upstream (nginx when installed, else
 * bench/upstream.mjs), the token emulator and the load generator on core 1. The generator is one
 * Node process (this file with --generate) for every case, closed loop on keep-alive
 * connections; the upstream counts the injected tokens, and a cell where a request reached it
 * without one fails the run.
 *
 *   npm run build && node bench/intercept-throughput.mjs [--rounds 3] [--duration 10]
 *     [--connections 50] [--warmup 3]
 * prints a Markdown table to stdout (progress on stderr); exit 1 when a cell broke.
 */

import { readFileSync } from "node:fs";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createHistogram } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Pool, ProxyAgent } from "undici";
import { startBearerProxy, startEmulatorProcess } from "./lib/bearer-proxy.mjs";
import { createBenchCertificates } from "./lib/certs.mjs";
import { createControlClient } from "./lib/control-client.mjs";
import {
  canPin,
  pinProcess,
  readCpuSeconds,
  spawnPinned,
  stopAllChildren,
  waitForExit,
} from "./lib/processes.mjs";
import { ensureTools } from "./lib/tools.mjs";
import { startUpstream } from "./lib/upstreams.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const PROXY_CORE = 0;
const LOAD_CORE = 1;

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    duration: { type: "string", default: "10" },
    connections: { type: "string", default: "50" },
    warmup: { type: "string", default: "3" },
    upstream: { type: "string" },
    generate: { type: "string" },
  },
});

if (values.generate) {
  await generate(JSON.parse(values.generate));
  process.exit(0);
}

const log = (line) => process.stderr.write(`intercept-bench: ${line}\n`);
const rounds = Number(values.rounds);
const durationS = Number(values.duration);
const connections = Number(values.connections);
const warmupS = Number(values.warmup);

/**
 * `reference`: the case a ratio is taken against, within each round. A new connection per
 * request has its own reference (plain HTTP, also a new connection each time), so the ratio is
 * what CONNECT and the TLS handshake add, not what a TCP connection costs.
 */
const perRequest = {
  // Each request costs a handshake on both cores: fewer at once keeps the load core from
  // drowning in its own TLS work before the proxy's core is busy.
  connections: Math.max(1, Math.round(connections / 5)),
  durationS: Math.max(2, Math.round(durationS / 2)),
};
const CASES = [
  {
    key: "plain",
    label: "plain HTTP to the proxy (keep-alive)",
    connections,
    durationS,
    reference: "plain",
  },
  {
    key: "intercepted",
    label: "https:// through a terminated CONNECT (tunnels kept alive)",
    connections,
    durationS,
    reference: "plain",
  },
  {
    key: "plain-per-request",
    label: "plain HTTP, a new connection per request",
    ...perRequest,
    reference: "plain-per-request",
  },
  {
    key: "tunnel-per-request",
    label: "https://, a new CONNECT + TLS handshake per request",
    ...perRequest,
    reference: "plain-per-request",
  },
];

const dir = await mkdtemp(join(tmpdir(), "bp-intercept-bench-"));
const pinned = canPin();
if (pinned) pinProcess(process.pid, LOAD_CORE);
else log("taskset or a second core missing: nothing pinned (numbers will be noisier)");
const proxyCore = pinned ? PROXY_CORE : null;
const loadCore = pinned ? LOAD_CORE : null;
const problems = [];
try {
  const certs = await createBenchCertificates(dir);
  const control = createControlClient(certs.caPem);
  const tools = ensureTools({ install: false, log, wantNginx: values.upstream !== "node" });
  const upstream = await startUpstream({
    core: loadCore,
    certs,
    control,
    nginxPath: values.upstream !== "node" ? tools.nginx.path : undefined,
    dir,
  });
  log(`${upstream.kind} upstream on ${upstream.url}`);
  const emulator = await startEmulatorProcess({ core: loadCore, certs });

  // The interception CA, made by the product (`intercept-ca --generate`'s function).
  const { generateInterceptCa } = await import(`${ROOT}dist/intercept/generate-ca.js`);
  const ca = await generateInterceptCa({ commonName: "bench interception CA" });
  const caCertFile = join(dir, "intercept-ca.pem");
  const caKeyFile = join(dir, "intercept-ca-key.pem");
  await writeFile(caCertFile, ca.certPem);
  await writeFile(caKeyFile, ca.keyPem, { mode: 0o600 });
  await chmod(caKeyFile, 0o600);
  // The name on the bench certificate: the leaf names it too (SAN DNS:localhost).
  const target = `https://localhost:${upstream.port}`;

  const proxy = await startBearerProxy({
    core: proxyCore,
    upstream,
    emulator,
    certs,
    dir,
    control,
    configure: (config) => ({
      ...config,
      intercept: { caCertFile, caKeyFile },
      upstreams: config.upstreams.map((u) => ({ ...u, baseUrl: target, intercept: true })),
    }),
  });
  log(`bearer-proxy on ${proxy.baseUrl} (pid ${proxy.child.pid}, core ${proxyCore ?? "any"})`);

  const runCell = async (caseDef, seconds, round) => {
    await upstream.reset();
    const cpuBefore = readCpuSeconds(proxy.pids());
    const startedMs = performance.now();
    const result = await runGenerator({
      mode: caseDef.key,
      proxyUrl: proxy.baseUrl,
      target,
      interceptCaPem: ca.certPem,
      upstreamCaFile: certs.caFile,
      connections: caseDef.connections,
      durationS: seconds,
    });
    const wallS = (performance.now() - startedMs) / 1000;
    const cpuSeconds = readCpuSeconds(proxy.pids()) - cpuBefore;
    const seen = await upstream.stats();
    const cell = {
      round,
      case: caseDef.key,
      rps: result.requests / (result.durationUs / 1e6),
      requests: result.requests,
      errors: result.errors,
      statusErrors: result.statusErrors,
      p50Ms: result.p50Us / 1000,
      p99Ms: result.p99Us / 1000,
      cpuMsPerRequest: result.requests > 0 ? (cpuSeconds * 1000) / result.requests : null,
      // How busy the proxy's core was: near 1, the proxy was the bottleneck.
      proxyCoreBusy: cpuSeconds / wallS,
      upstreamBearer: seen.bearer,
      upstreamPlain: seen.plain,
    };
    if (round > 0) {
      if (cell.requests === 0) problems.push(`${caseDef.key} r${round}: no request completed`);
      if (cell.errors + cell.statusErrors > Math.max(10, cell.requests * 0.01))
        problems.push(
          `${caseDef.key} r${round}: ${cell.errors} errors, ${cell.statusErrors} non-2xx`,
        );
      if (seen.plain > 0 || seen.bearer === 0)
        problems.push(
          `${caseDef.key} r${round}: injection missing (${seen.bearer} with a token, ${seen.plain} without)`,
        );
      if (proxy.isDead()) problems.push(`${caseDef.key} r${round}: the proxy died`);
    }
    return cell;
  };

  for (const caseDef of CASES) {
    if (warmupS > 0) await runCell(caseDef, Math.min(warmupS, caseDef.durationS), 0);
  }
  const cells = [];
  for (let round = 1; round <= rounds; round++) {
    for (const caseDef of CASES) {
      const cell = await runCell(caseDef, caseDef.durationS, round);
      cells.push(cell);
      log(
        `[r${round}] ${caseDef.key.padEnd(19)} ${cell.rps.toFixed(0).padStart(6)} req/s  ` +
          `cpu ${cell.cpuMsPerRequest?.toFixed(3)} ms/req  proxy core ${(cell.proxyCoreBusy * 100).toFixed(0)} %  ` +
          `p50 ${cell.p50Ms.toFixed(2)} ms  p99 ${cell.p99Ms.toFixed(2)} ms`,
      );
    }
  }
  process.stdout.write(
    renderReport({ cells, upstream, proxyCore, loadCore, tools, resultsDir: dir }),
  );
  await control.close();
} catch (error) {
  problems.push(error.stack ?? String(error));
} finally {
  await stopAllChildren();
  await rm(dir, { recursive: true, force: true });
}
if (problems.length > 0) {
  log(`problems:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}

/** Runs the load generator (this file, --generate) on the load core; resolves with its result. */
async function runGenerator(options) {
  const child = spawnPinned(loadCore, process.execPath, [
    fileURLToPath(import.meta.url),
    "--generate",
    JSON.stringify(options),
  ]);
  let stdout = "";
  child.stdout.setEncoding("utf8").on("data", (chunk) => {
    stdout += chunk;
  });
  const { code } = await waitForExit(child, (options.durationS + 30) * 1000);
  const line = /^BENCH_RESULT (.*)$/m.exec(stdout);
  if (code !== 0 || !line) {
    throw new Error(`load generator failed (${code}): ${child.stderrText.trim().slice(-500)}`);
  }
  return JSON.parse(line[1]);
}

/**
 * The load generator: `connections` closed loops, each sending its next request when the last
 * answer is complete; undici's dispatch with a counting handler (bench/load.mjs's), through a
 * Pool to the proxy (`plain`) or a ProxyAgent (`intercepted`, `tunnel-per-request`).
 */
async function generate(options) {
  const {
    mode,
    proxyUrl,
    target,
    interceptCaPem,
    connections: loops,
    durationS: seconds,
  } = options;
  const dispatcher = mode.startsWith("plain")
    ? new Pool(proxyUrl, { connections: loops, pipelining: 1, keepAliveTimeout: 60_000 })
    : new ProxyAgent({
        uri: proxyUrl,
        connections: loops,
        keepAliveTimeout: 60_000,
        requestTls: { ca: interceptCaPem, rejectUnauthorized: true },
      });
  const origin = mode.startsWith("plain") ? proxyUrl : target;
  // A new connection (tunnel) per request: undici closes it after the answer (Connection: close).
  const reset = mode.endsWith("-per-request");
  const histogram = createHistogram();
  const result = { requests: 0, errors: 0, statusErrors: 0 };
  const sendOne = () =>
    new Promise((resolve) => {
      const started = process.hrtime.bigint();
      let status = 0;
      dispatcher.dispatch(
        {
          origin,
          path: "/small",
          method: "GET",
          reset,
          headersTimeout: 10_000,
          bodyTimeout: 10_000,
        },
        {
          onRequestStart() {},
          onResponseStart(_controller, statusCode) {
            status = statusCode;
          },
          onResponseData() {},
          onResponseEnd() {
            result.requests++;
            if (status < 200 || status > 299) result.statusErrors++;
            histogram.record(Math.max(1, Number(process.hrtime.bigint() - started)));
            resolve();
          },
          onResponseError() {
            result.errors++;
            resolve();
          },
        },
      );
    });
  const startedAt = performance.now();
  const deadline = startedAt + seconds * 1000;
  const loop = async () => {
    while (performance.now() < deadline) await sendOne();
  };
  await Promise.all(Array.from({ length: loops }, loop));
  const elapsedMs = performance.now() - startedAt;
  await dispatcher.close();
  const us = (ns) => Math.round(ns / 1000);
  process.stdout.write(
    `BENCH_RESULT ${JSON.stringify({
      ...result,
      durationUs: Math.round(elapsedMs * 1000),
      p50Us: us(histogram.percentile(50)),
      p99Us: us(histogram.percentile(99)),
    })}\n`,
  );
}

function median(xs) {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Median and range of `value(cell) / value(reference cell)` over the rounds. */
function ratioOverRounds(cells, caseDef, value) {
  const ratios = [];
  for (const cell of cells.filter((c) => c.case === caseDef.key)) {
    const reference = cells.find((c) => c.case === caseDef.reference && c.round === cell.round);
    if (reference && value(reference) > 0) ratios.push(value(cell) / value(reference));
  }
  const f = (x) => x.toFixed(2);
  return `${f(median(ratios))}× (${f(Math.min(...ratios))}–${f(Math.max(...ratios))})`;
}

function renderReport({ cells, upstream, proxyCore, loadCore, tools }) {
  const rows = CASES.map((caseDef) => {
    const list = cells.filter((c) => c.case === caseDef.key);
    const m = (value) => median(list.map(value));
    const range = (value) =>
      `${Math.min(...list.map(value)).toFixed(0)}–${Math.max(...list.map(value)).toFixed(0)}`;
    const capacity = (c) => 1000 / c.cpuMsPerRequest;
    return (
      `| ${caseDef.label} | ${caseDef.connections} | ${m((c) => c.rps).toFixed(0)} (${range((c) => c.rps)}) | ` +
      `${m((c) => c.cpuMsPerRequest).toFixed(3)} | ${m(capacity).toFixed(0)} | ` +
      `${caseDef.reference === caseDef.key ? "—" : `${ratioOverRounds(cells, caseDef, (c) => c.cpuMsPerRequest)} ${caseDef.reference}`} | ` +
      `${caseDef.reference === caseDef.key ? "—" : ratioOverRounds(cells, caseDef, (c) => c.rps)} | ` +
      `${(m((c) => c.proxyCoreBusy) * 100).toFixed(0)} % | ${m((c) => c.p50Ms).toFixed(2)} / ${m((c) => c.p99Ms).toFixed(2)} |`
    );
  });
  const cpuModel = (() => {
    try {
      return /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? "?";
    } catch {
      return "?";
    }
  })();
  return [
    `# CONNECT interception: small GET, intercepted vs plain (${new Date().toISOString()})`,
    "",
    `${rounds} interleaved rounds of ${durationS} s per case (per-request cases: ${perRequest.durationS} s); medians, ranges over the rounds, ratios taken within each round against the reference named.`,
    `Proxy: one bearer-proxy process (${process.version}) on core ${proxyCore ?? "any"}; upstream: ${upstream.kind}${upstream.kind === "nginx" ? ` (${tools.nginx.version})` : ""}, token emulator and the Node load generator (undici ${readVersion("undici")}, closed loop) on core ${loadCore ?? "any"}. CPU: ${cpuModel}. Load average at the end: ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" / ")}.`,
    "Capacity = 1000 / CPU ms per request: the req/s one proxy core gives when it is the bottleneck. Req/s is the proxy's only when its core is busy near 100 %; below that the load core capped it.",
    "",
    "| case | connections | req/s | proxy CPU ms / request | capacity, req/s per core | CPU / request vs reference | req/s vs reference | proxy core busy | p50 / p99 ms |",
    "|---|---|---|---|---|---|---|---|---|",
    ...rows,
    "",
  ].join("\n");
}

function readVersion(name) {
  try {
    return JSON.parse(readFileSync(join(ROOT, "node_modules", name, "package.json"), "utf8"))
      .version;
  } catch {
    return "?";
  }
}
