#!/usr/bin/env node
/**
 * Two proxies at once: a before/after comparison that the machine's drift cannot bias. Both are
 * pinned to the same core and loaded at the same time (one wrk each, on the other core), so at
 * every instant they see the same machine; the figure is the ratio of their throughputs and of
 * their CPU per request, round by round. On this project's shared 2-vCPU VM, cells measured one
 * after another moved ±15 %; here an A/A pair of the same build read 0.999–1.001× (0.983–1.018
 * over its rounds) — steady enough to see a 1 % change (bench/PROFILE.md, ninth and tenth passes).
 *
 *   node bench/coscheduled.mjs --a PATH|forwarder --b PATH|forwarder [--variant KEY]
 *     [--a-flags="NODE FLAGS"] [--b-flags="NODE FLAGS"]
 *     [--rounds 6] [--duration 8] [--warmup 3] [--idle 4] [--connections 25] [--path /small]
 *     [--method GET] [--body-bytes 0] [--smoke]
 * PATH is a bearer-proxy CLI (dist/bundle/cli.cjs, dist/cli.js, or another build's copy);
 * `forwarder` is the minimal undici forwarder (bench/baselines/undici-forwarder.mjs). Both run
 * on the Node that runs this script, with BENCH_BEARER_PROXY_NODE_FLAGS / BENCH_BASELINE_NODE_FLAGS.
 * `--a-flags` / `--b-flags` give one side's bearer-proxy its own Node flags instead of
 * BENCH_BEARER_PROXY_NODE_FLAGS, and NAME=VALUE words as its environment (as footprint.mjs's
 * flag sets): the same build under two settings (`--a X --a-flags="--liftoff-only
 * MALLOC_ARENA_MAX=2" --b X`; parseArgs takes a value that starts with - only after =).
 * `--variant KEY` runs a with one of the bench's feature variants (lib/variants.mjs: its
 * config, environment and request headers, checked to answer 200 before it is measured), so
 * `--a X --variant dpop --b X` is a feature's cost; the report then adds a's CPU per request
 * less b's (the added CPU that bench/feature-floor.mjs's floors are read against). With
 * `--a forwarder --variant dpop --b forwarder` it is the same feature's floor in place: the
 * minimal forwarder running the feature's dist/ code per request (the variants with `inPlace`:
 * dpop, tracing, tracing-sampled), against the bare forwarder.
 * Each round starts both fresh (which first alternates), idles them `--idle` seconds (a sidecar
 * waits for its app; what a process does while idle can cost it later), warms them up at once,
 * then measures.
 * `--both` runs b with the variant too: an A/B of two builds under one feature (`--a NEW --b OLD
 * --variant callers-basic --both`), where a variant's ratio to its own plain moves too little
 * between builds for two runs of each to tell apart.
 * `--method` and `--body-bytes` send another request than a GET: `--method POST --path /read
 * --body-bytes 65536` is the bench's 64 KiB POST that the upstream reads.
 * Run an A/A pair (`--a X --b X`) in the same hour to know the harness's spread.
 * Each round also reports how busy both cores were while measured (/proc/stat): the proxies'
 * core should be saturated, or the load core (wrk, and the tracing variants' sink) limited the
 * load and the ratio understates a difference; the report notes such rounds.
 * Needs wrk and cores 0 and 1 to pin to, both in this process's affinity (nginx as the upstream
 * when installed); exits 1 if either side answered with errors, which would make its throughput
 * meaningless.
 */
import { chmod, mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { splitFlagSet } from "./footprint.mjs";
import { startBackends } from "./lib/backends.mjs";
import { startBearerProxy } from "./lib/bearer-proxy.mjs";
import { startUndiciForwarder } from "./lib/competitors.mjs";
import { runClosedLoop } from "./lib/generators.mjs";
import { startOtlpSink } from "./lib/otlp-sink.mjs";
import {
  allowedCores,
  canPin,
  coreBusyShare,
  readCoreTimes,
  readCpuSeconds,
  stopAllChildren,
} from "./lib/processes.mjs";
import { spread } from "./lib/summarize.mjs";
import { ensureTools } from "./lib/tools.mjs";
import {
  ALL_VARIANTS,
  BEARER_PROXY_VARIANTS,
  selectVariants,
  startInPlaceFloor,
  startVariant,
} from "./lib/variants.mjs";

const FORWARDER = "forwarder";

const { values } = parseArgs({
  options: {
    a: { type: "string" },
    b: { type: "string" },
    rounds: { type: "string" },
    duration: { type: "string" },
    warmup: { type: "string" },
    idle: { type: "string" },
    connections: { type: "string", default: "25" },
    path: { type: "string", default: "/small" },
    method: { type: "string", default: "GET" },
    "body-bytes": { type: "string", default: "0" },
    variant: { type: "string" },
    both: { type: "boolean", default: false },
    "a-flags": { type: "string" },
    "b-flags": { type: "string" },
    smoke: { type: "boolean", default: false },
  },
});
if (!values.a || !values.b) {
  process.stderr.write(
    "usage: coscheduled.mjs --a PATH|forwarder --b PATH|forwarder [--rounds N] [--duration S]\n",
  );
  process.exit(2);
}
const [variant] = values.variant ? selectVariants([values.variant]) : [];
if (values.variant && (!variant || (values.a === FORWARDER && !variant.inPlace))) {
  const inPlace = BEARER_PROXY_VARIANTS.filter((v) => v.inPlace);
  process.stderr.write(
    `coscheduled: --variant needs one of ${ALL_VARIANTS.join(", ")} with a bearer-proxy build as --a, ` +
      `or one of ${inPlace.map((v) => v.key).join(", ")} with --a forwarder\n`,
  );
  process.exit(2);
}
if (values.both && (!variant || values.a === FORWARDER || values.b === FORWARDER)) {
  process.stderr.write(
    "coscheduled: --both needs --variant and a bearer-proxy build on each side\n",
  );
  process.exit(2);
}
/** Whether side `which` runs the variant. */
const runsVariant = (which) => variant !== undefined && (which === "a" || values.both);
const smoke = values.smoke;
const settings = {
  rounds: Number(values.rounds ?? (smoke ? 1 : 6)),
  durationS: Number(values.duration ?? (smoke ? 1 : 8)),
  warmupS: Number(values.warmup ?? (smoke ? 1 : 3)),
  idleS: Number(values.idle ?? (smoke ? 0 : 4)),
  connections: Number(values.connections),
};
if (!(settings.rounds >= 1 && settings.durationS > 0)) {
  process.stderr.write("coscheduled: --rounds must be at least 1 and --duration above 0\n");
  process.exit(2);
}
const tools = ensureTools({ install: false, log: () => {} });
if (!tools.wrk.path || !canPin()) {
  process.stderr.write("coscheduled: needs wrk and two cores to pin to (taskset)\n");
  process.exit(2);
}
const [proxyCore, loadCore] = [0, 1];
const allowed = allowedCores();
if (allowed && !(allowed.has(proxyCore) && allowed.has(loadCore))) {
  process.stderr.write(
    `coscheduled: needs cores ${proxyCore} and ${loadCore}; this process may use ${[...allowed].join(",")}\n`,
  );
  process.exit(2);
}
/**
 * Below this busy share of the proxies' core in a round, the proxies were not what limited the
 * load (wrk, or the tracing variants' sink, on the load core was): the ratio then says less.
 */
const MIN_PROXY_CORE_BUSY = 0.95;

/** A share as a whole percentage ("97 %"; "?" when unknown). */
const percent = (share) => (Number.isFinite(share) ? `${Math.round(share * 100)} %` : "?");

/** "median× (min–max)" of the rounds' ratios. */
function ratioSummary(ratios) {
  const { median, min, max } = spread(ratios);
  return `${median.toFixed(3)}× (${min.toFixed(3)}–${max.toFixed(3)})`;
}
const label = (side) => (side === FORWARDER ? FORWARDER : resolve(side));
/** How a side is reported: its build, then (in prose) its variant and its own Node flags. */
const describe = (which) =>
  [
    `\`${label(values[which])}\``,
    runsVariant(which)
      ? values.a === FORWARDER
        ? ` with variant \`${variant.key}\`'s code in place`
        : ` with variant \`${variant.key}\``
      : "",
    values[`${which}-flags`] !== undefined ? `, Node flags \`${values[`${which}-flags`]}\`` : "",
  ].join("");

const dir = await mkdtemp(join(tmpdir(), "bearer-proxy-cosched-"));
// nginx's workers (another user when it runs as root) read the upstream's files under it: /1m and
// /read answered every request with an error without this (run.mjs does the same).
await chmod(dir, 0o755);
const rows = [];
let failed = false;
try {
  const backends = await startBackends({ dir, core: loadCore, nginxPath: tools.nginx.path });
  const { certs, control, upstream } = backends;
  // The tracing variants' collector: one counting sink on the load core, started when asked.
  let sink = null;
  const otlpSink = () => {
    sink ??= startOtlpSink({ core: loadCore });
    return sink;
  };
  /** Side "a" or "b": its build (or the forwarder), its Node flags, and for a the variant. */
  const start = async (which, tag) => {
    const side = values[which];
    if (side === FORWARDER) {
      if (which === "b" || !variant)
        return startUndiciForwarder({ core: proxyCore, upstream, certs });
      return startInPlaceFloor({ variant, otlpSink, core: proxyCore, upstream, certs });
    }
    const flags = values[`${which}-flags`];
    const own = flags === undefined ? undefined : splitFlagSet(flags);
    const startProxy = (configure, ownTag, env, cli) =>
      startBearerProxy({
        ...backends,
        core: proxyCore,
        dir,
        tag: ownTag,
        cli: cli ?? resolve(side),
        configure,
        env: { ...own?.env, ...env },
        ...(own ? { nodeFlags: own.args } : {}),
      });
    if (!runsVariant(which)) return startProxy(undefined, tag);
    await mkdir(join(dir, tag));
    return startVariant({ variant, dir: join(dir, tag), control, startProxy, otlpSink });
  };
  const load = (proxy, durationS) =>
    runClosedLoop({
      tool: "wrk",
      core: loadCore,
      url: `${proxy.baseUrl}${values.path}`,
      method: values.method,
      bodyBytes: Number(values["body-bytes"]),
      connections: settings.connections,
      durationS,
      headers: proxy.headers ?? {},
    });
  for (let round = 1; round <= settings.rounds; round++) {
    // Which starts first alternates: the first is 150–250 ms older when the load begins.
    const startA = () => start("a", `-a${round}`);
    const startB = () => start("b", `-b${round}`);
    const [a, b] =
      round % 2 === 1
        ? [await startA(), await startB()]
        : await (async () => {
            const later = await startB();
            return [await startA(), later];
          })();
    await new Promise((done) => setTimeout(done, settings.idleS * 1000));
    await Promise.all([load(a, settings.warmupS), load(b, settings.warmupS)]);
    const cpuBefore = [readCpuSeconds(a.pids()), readCpuSeconds(b.pids())];
    const coresBefore = readCoreTimes();
    const [ra, rb] = await Promise.all([load(a, settings.durationS), load(b, settings.durationS)]);
    const coresAfter = readCoreTimes();
    const cpuA = readCpuSeconds(a.pids()) - cpuBefore[0];
    const cpuB = readCpuSeconds(b.pids()) - cpuBefore[1];
    await a.stop();
    await b.stop();
    const errors = ra.errors + ra.statusErrors + rb.errors + rb.statusErrors;
    if (errors > 0 || ra.requests === 0 || rb.requests === 0) failed = true;
    const row = {
      round,
      rpsA: ra.rps,
      rpsB: rb.rps,
      usA: (cpuA / ra.requests) * 1e6,
      usB: (cpuB / rb.requests) * 1e6,
      errors,
      proxyCoreBusy: coreBusyShare(coresBefore, coresAfter, proxyCore),
      loadCoreBusy: coreBusyShare(coresBefore, coresAfter, loadCore),
    };
    row.throughput = ra.rps / rb.rps;
    row.cpu = row.usA / row.usB;
    rows.push(row);
    console.error(
      `coscheduled: round ${round}: a ${row.rpsA.toFixed(0)} req/s ${row.usA.toFixed(1)} µs, ` +
        `b ${row.rpsB.toFixed(0)} req/s ${row.usB.toFixed(1)} µs, a ÷ b ${row.throughput.toFixed(3)}, ` +
        `cores busy ${percent(row.proxyCoreBusy)} / ${percent(row.loadCoreBusy)}` +
        (errors ? `, ${errors} errors` : ""),
    );
  }
  await control.close();
  await (await sink)?.close();
} finally {
  await stopAllChildren();
  await rm(dir, { recursive: true, force: true });
}

const throughputs = rows.map((r) => r.throughput);
const cpus = rows.map((r) => r.cpu);
console.log(`## Two proxies at once: a ÷ b\n`);
console.log(`a: ${describe("a")}`);
console.log(`b: ${describe("b")}`);
console.log(
  `\nNode ${process.version}; both on core ${proxyCore}, one wrk -c${settings.connections} each on core ${loadCore}, ` +
    `${values.method} ${values.path}${Number(values["body-bytes"]) > 0 ? ` with a ${values["body-bytes"]}-byte body` : ""}; per round: start both, ${settings.idleS} s idle, ${settings.warmupS} s warm-up, ${settings.durationS} s measured.\n`,
);
console.log(
  `| round | a req/s | b req/s | a µs CPU/request | b µs CPU/request | throughput a ÷ b | CPU/request a ÷ b | core ${proxyCore} / ${loadCore} busy |`,
);
console.log("|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.round} | ${r.rpsA.toFixed(0)} | ${r.rpsB.toFixed(0)} | ${r.usA.toFixed(1)} | ${r.usB.toFixed(1)} | ${r.throughput.toFixed(3)} | ${r.cpu.toFixed(3)} | ${percent(r.proxyCoreBusy)} / ${percent(r.loadCoreBusy)} |`,
  );
}
console.log(
  `\n**throughput a ÷ b ${ratioSummary(throughputs)}**, ` +
    `CPU per request a ÷ b ${ratioSummary(cpus)}, median of ${rows.length} round(s).`,
);
if (variant) {
  const added = spread(rows.map((r) => r.usA - r.usB));
  const what = values.both ? `build a under \`${variant.key}\`` : `\`${variant.key}\``;
  console.log(
    `\nCPU per request added by ${what} (a − b): ${added.median.toFixed(1)} µs ` +
      `(${added.min.toFixed(1)}–${added.max.toFixed(1)}) on b's ${spread(rows.map((r) => r.usB)).median.toFixed(1)} µs.`,
  );
}
const unsaturated = rows.filter((r) => r.proxyCoreBusy < MIN_PROXY_CORE_BUSY);
if (unsaturated.length > 0) {
  console.log(
    `\nNote: core ${proxyCore} was under ${percent(MIN_PROXY_CORE_BUSY)} busy in round(s) ` +
      `${unsaturated.map((r) => r.round).join(", ")}: the proxies were not what limited the load ` +
      `there (the load core ${loadCore} was), so those ratios understate a difference.`,
  );
}
if (failed) {
  console.log(
    "\nFAIL: a side answered with errors (or served nothing): its throughput means nothing.",
  );
  process.exitCode = 1;
}
