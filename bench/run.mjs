/**
 * `npm run bench`: bearer-proxy side by side with nginx, a minimal undici forwarder,
 * fastify + @fastify/http-proxy, and no proxy at all, in interleaved rounds, plus bearer-proxy
 * variants (one feature on) against plain bearer-proxy in the small case. Writes
 * bench/results/<ISO date>.md and .json (smoke mode: smoke-latest.*). See bench/README.md.
 *
 * Exit code: 0, or 1 on real breakage (a competitor failing to start or dying, a variant whose
 * credential is not accepted, a cell without a successful request, missing token injection, a
 * cold burst not coalesced to one token request), or with --strict also when a target FAILs
 * (the variants' included). 2 on bad options.
 */
import { rmSync } from "node:fs";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { footprintSettings, renderFootprintMarkdown, runFootprint } from "./footprint.mjs";
import { createBenchCertificates } from "./lib/certs.mjs";
import { createControlClient } from "./lib/control-client.mjs";
import { describeEnvironment } from "./lib/environment.mjs";
import { LATENCY_CASE, measureCell, THROUGHPUT_CASES } from "./lib/measure.mjs";
import { neighbourPids, withNeighbours } from "./lib/neighbours.mjs";
import { canPin, pinProcess, stopAllChildren } from "./lib/processes.mjs";
import { renderMarkdown } from "./lib/report.mjs";
import { restartAll } from "./lib/restart.mjs";
import { parseSettings } from "./lib/settings.mjs";
import { startAll } from "./lib/start-all.mjs";
import { spread, summarize } from "./lib/summarize.mjs";
import { checkTargets } from "./lib/targets.mjs";
import { measureColdBurst, measureStartToReady } from "./lib/token-side.mjs";
import { ensureTools } from "./lib/tools.mjs";
import {
  attachFloorCosts,
  floorCosts,
  floorMarkdown,
  measureFloors,
} from "./lib/variant-floor.mjs";
import { accountSpans } from "./lib/variant-tracing.mjs";
import { selectVariants, VARIANT_CASE, variantChecks } from "./lib/variants.mjs";

const RESULTS_DIR = fileURLToPath(new URL("./results", import.meta.url));
const PROXY_CORE = 0;
const LOAD_CORE = 1;

const log = (line) => process.stderr.write(`bench: ${line}\n`);

function progress(cell) {
  const f = (v, d = 0) => (typeof v === "number" ? v.toFixed(d) : "—");
  log(
    `[r${cell.round}] ${cell.case.padEnd(8)} ${cell.competitor.padEnd(26)} ${f(cell.rps).padStart(7)} req/s  ` +
      `p50 ${f(cell.p50Ms, 2)} ms  p99 ${f(cell.p99Ms, 2)} ms  cpu ${f(cell.cpuSecondsPer10k, 3)} s/10k  ` +
      `rss ${f(cell.peakRssMiB, 1)} MiB  neighbours ${f(cell.neighbourCpuMs)} ms${cell.problems.length > 0 ? `  ! ${cell.problems.join("; ")}` : ""}`,
  );
}

/**
 * A few seconds of small GETs per competitor before it is measured. Without `--fresh` all warm
 * up once at the start, one after the other. With it each warms up right before its first cell
 * of the round: warming all first left the k-th competitor idle for ~4k s before its cell, and
 * an identical copy of plain bearer-proxy measured sixth cost 15–42 % more CPU per request than
 * plain measured first (what V8 does to a process that sat idle: the memory reducer shrinks its
 * heap, cold code is flushed; bench/PROFILE.md).
 */
async function warmUp(competitors, settings, ctx) {
  if (settings.warmupS <= 0) return;
  if (competitors.length > 1) log(`warm-up: ${settings.warmupS} s small GET per competitor`);
  const warm = { ...settings, durationS: settings.warmupS };
  for (const competitor of competitors) {
    await measureCell({
      ...ctx,
      competitor,
      caseDef: THROUGHPUT_CASES[0],
      round: 0,
      settings: warm,
    });
  }
}

/**
 * `--fresh`: round r starts (r − 1) × ⌈n ÷ rounds⌉ places further into the list, so the first
 * slot of a round — the one right after the restarts, which measured plain bearer-proxy ~10 %
 * cheaper than an identical copy in the second slot — goes to a different competitor each round.
 */
function rotated(competitors, round, rounds) {
  const step = Math.ceil(competitors.length / rounds);
  const start = ((round - 1) * step) % competitors.length;
  return [...competitors.slice(start), ...competitors.slice(0, start)];
}

async function runMatrix(competitors, settings, ctx, problems) {
  const cases = [
    ...THROUGHPUT_CASES.filter((c) => settings.cases.includes(c.key)),
    ...(settings.cases.includes("latency") ? [LATENCY_CASE] : []),
  ];
  const cells = [];
  for (let round = 1; round <= settings.rounds; round++) {
    if (settings.fresh && round > 1) await restartAll(competitors, { log, problems });
    const order = settings.fresh ? rotated(competitors, round, settings.rounds) : competitors;
    for (const caseDef of cases) {
      for (const competitor of order) {
        if (competitor.isDead()) continue;
        const smallOnly = competitor.variant || competitor.inPlaceOf;
        if (smallOnly && caseDef.key !== VARIANT_CASE) continue;
        // --fresh: each competitor warms up right before its cell, so none has sat idle
        // longer than another since its warm-up (see warmUp's comment).
        const neighbours = neighbourPids(competitors, competitor);
        if (settings.fresh && caseDef === cases[0]) {
          // Isolated too: the competitor measured just before goes on working after its load.
          await withNeighbours(neighbours, settings.isolate, () =>
            warmUp([competitor], settings, ctx),
          );
        }
        const { result: cell, neighbourCpuMs } = await withNeighbours(
          neighbours,
          settings.isolate,
          () => measureCell({ ...ctx, competitor, caseDef, round, settings }),
        );
        cell.neighbourCpuMs = neighbourCpuMs;
        cells.push(cell);
        problems.push(...cell.problems);
        progress(cell);
      }
    }
  }
  return cells;
}

async function runTokenSide(settings, ctx, problems) {
  const token = {};
  try {
    token.coldBurst = await measureColdBurst({
      ...ctx,
      core: ctx.proxyCore,
      concurrency: settings.burst,
    });
    log(
      `cold burst: ${token.coldBurst.tokenRequests} token request(s), p99 ${token.coldBurst.p99Ms?.toFixed(1)} ms`,
    );
    if (token.coldBurst.tokenRequests !== 1) {
      problems.push(`cold burst made ${token.coldBurst.tokenRequests} token requests (must be 1)`);
    }
    if ((token.coldBurst.statuses[200] ?? 0) !== settings.burst) {
      problems.push(
        `cold burst: not every request answered 200 (${JSON.stringify(token.coldBurst.statuses)})`,
      );
    }
  } catch (error) {
    token.coldBurstError = error.message;
    problems.push(`cold burst failed: ${error.message}`);
  }
  try {
    const { samples } = await measureStartToReady({
      ...ctx,
      core: ctx.proxyCore,
      samples: settings.readySamples,
    });
    token.startToReady = { samples, ...spread(samples) };
    log(`start to ready: median ${token.startToReady.median.toFixed(0)} ms`);
  } catch (error) {
    token.startToReadyError = error.message;
    problems.push(`start-to-ready failed: ${error.message}`);
  }
  return token;
}

async function main() {
  const settings = parseSettings(process.argv.slice(2));
  if (settings.help) {
    process.stdout.write(`${settings.help}\n`);
    return 0;
  }
  const startedAt = new Date().toISOString();
  const pinned = canPin() && pinProcess(process.pid, LOAD_CORE);
  const proxyCore = pinned ? PROXY_CORE : null;
  const loadCore = pinned ? LOAD_CORE : null;
  const tools = ensureTools({
    install: settings.install,
    log,
    wantNginx: settings.competitors.includes("nginx") || settings.upstreamChoice !== "node",
  });
  const generator = settings.generatorChoice ?? (tools.wrk.path ? "wrk" : "node");
  const generatorNote =
    generator === "node"
      ? `bench/load.mjs; wrk ${tools.wrk.path ? "not chosen" : tools.wrk.note}`
      : tools.wrk.version;
  log(`load generator: ${generator} (${generatorNote}); pinned: ${pinned}`);
  // Counted from here: installing tools may take minutes on a fresh machine.
  const abort = setTimeout(() => {
    log(`time limit of ${settings.timeLimitS} s reached; aborting`);
    stopAllChildren().finally(() => process.exit(1));
  }, settings.timeLimitS * 1000);
  abort.unref();

  const dir = await mkdtemp(join(tmpdir(), "bearer-proxy-bench-"));
  await chmod(dir, 0o755);
  // Also on SIGINT/abort, which exit without reaching the finally below.
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  const problems = [];
  const skipped = [];
  const ctx = { dir, proxyCore, loadCore };
  let control;
  try {
    const certs = await createBenchCertificates(dir);
    control = createControlClient(certs.caPem);
    Object.assign(ctx, { certs, control });
    const started = await startAll({ settings, tools, ctx, log, problems, skipped });
    Object.assign(ctx, { upstream: started.upstream, emulator: started.emulator });
    const run = { ...settings, generator, loadCore };
    if (!run.fresh) await warmUp(started.competitors, run, ctx);
    const cells = await runMatrix(started.competitors, run, ctx, problems);
    // Before anything else: stops the tracing variants (flushing their queued spans).
    const spans = await accountSpans(started.competitors, control, log);
    // Issue 33: each feature's floor, on this Node and build, while the proxies are idle.
    const measuredVariants = selectVariants(settings.variants).filter((v) =>
      started.competitors.some((c) => c.variant === v),
    );
    const floors = await measureFloors({
      variants: measuredVariants,
      core: proxyCore,
      smoke: settings.smoke,
      log,
      problems,
    });
    const bearerProxyRan = started.competitors.some((c) => c.key === "bearer-proxy");
    const token = bearerProxyRan ? await runTokenSide(settings, ctx, problems) : null;
    // Issue 17's footprint section (bench/footprint.mjs): per Node version and flag set.
    const footprint =
      bearerProxyRan && settings.footprint
        ? await runFootprint({
            ctx,
            settings: footprintSettings({ smoke: settings.smoke }),
            log,
          })
        : null;
    if (footprint) problems.push(...footprint.problems);

    const order = started.competitors.map((c) => c.key);
    const summary = summarize(cells, order);
    const variants = measuredVariants;
    const costs = floorCosts(cells, variants, floors);
    attachFloorCosts(summary, costs);
    const targets = checkTargets(summary, token, { extraChecks: variantChecks(variants) });
    const meta = {
      startedAt,
      smoke: settings.smoke,
      rounds: settings.rounds,
      fresh: settings.fresh,
      isolate: settings.isolate,
      neighbourCpuMs: spread(cells.map((c) => c.neighbourCpuMs)),
      durationS: settings.durationS,
      connections: settings.connections,
      rate: settings.rate,
      latencyDurationS: settings.latencyDurationS,
      latencyWarmupS: settings.latencyWarmupS,
      generator,
      generatorNote,
      upstream: started.upstream.kind,
      pinned,
      proxyCore,
      loadCore,
      skipped,
      variants: variants.map(({ key, label, issue, minRatio, floor, maxFloorMultiple }) => ({
        key,
        label,
        issue,
        minRatio,
        floor,
        maxFloorMultiple,
      })),
      environment: describeEnvironment(tools),
    };
    const cases = THROUGHPUT_CASES.filter((c) => settings.cases.includes(c.key));
    const markdown =
      renderMarkdown({
        meta,
        summary,
        cases,
        token,
        targets,
        order,
        problems,
        spans,
        floors: floorMarkdown(costs, floors),
      }) + (footprint ? `\n${renderFootprintMarkdown(footprint)}` : "");
    const outDir = settings.outDir ?? RESULTS_DIR;
    await mkdir(outDir, { recursive: true });
    const base = settings.smoke
      ? "smoke-latest"
      : startedAt.replace(/:/g, "-").replace(/\.\d+Z$/, "Z");
    await writeFile(join(outDir, `${base}.md`), markdown);
    await writeFile(
      join(outDir, `${base}.json`),
      `${JSON.stringify({ meta, summary, token, targets, problems, cells, spans, floors, footprint }, null, 2)}\n`,
    );
    process.stdout.write(`${markdown}\n`);
    log(`results written to ${join(outDir, `${base}.md`)} and .json`);
    const failedTargets = targets.filter((t) => t.results["bearer-proxy"].verdict === "FAIL");
    if (problems.length > 0) {
      log(`${problems.length} problem(s):\n  ${problems.join("\n  ")}`);
      return 1;
    }
    if (settings.strict && failedTargets.length > 0) return 1;
    return 0;
  } finally {
    await stopAllChildren();
    await control?.close();
    await rm(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (error) => {
    log(error.name === "UsageError" ? error.message : `failed: ${error.stack ?? error.message}`);
    stopAllChildren().finally(() => process.exit(error.name === "UsageError" ? 2 : 1));
  },
);
