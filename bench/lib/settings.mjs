/**
 * Command-line options of `npm run bench` and the two modes' defaults.
 */
import { parseArgs } from "node:util";
import { ALL_VARIANTS } from "./variants.mjs";

export const ALL_COMPETITORS = [
  "bearer-proxy",
  "bearer-proxy-h2",
  "nginx",
  "undici",
  "fastify",
  "direct",
];
export const ALL_CASES = ["small", "post64k", "early", "get1m", "latency"];

const USAGE = `usage: node bench/run.mjs [--smoke] [options]
  --smoke                 CI mode: 1 round, 1 s cells, cases small,early,latency
  --rounds N              interleaved rounds (full: 3)
  --fresh                 start bearer-proxy, its variants and the Node baselines again (and
                          warm them up) before every round after the first: one process's JIT
                          and memory-layout luck becomes one round's, shown as spread
  --isolate               stop (SIGSTOP) the other competitors while each cell (and its
                          --fresh warm-up) runs: a proxy that just served a cell keeps
                          working for seconds (GC, memory given back) on the shared proxy
                          core, at the next cell's expense
  --duration S            seconds per throughput cell (full: 10)
  --connections N         closed-loop connections (50)
  --rate R                fixed-rate latency case, req/s (2000)
  --latency-duration S    seconds per latency cell (full: 10)
  --competitors LIST      comma list of ${ALL_COMPETITORS.join(",")}
  --cases LIST            comma list of ${ALL_CASES.join(",")}
  --variants LIST|none    bearer-proxy variants measured against plain bearer-proxy in the
                          small case (feature cost): comma list of ${ALL_VARIANTS.join(",")}
                          (default: all; they need bearer-proxy and the small case)
  --generator wrk|node    force the closed-loop generator (default: wrk when installed)
  --upstream nginx|node   force the upstream (default: nginx when installed)
  --no-install            never apt-get install wrk/nginx
  --burst N               cold-burst concurrency (1000)
  --ready-samples N       start-to-ready samples (full: 5)
  --out DIR               where results go (bench/results)
  --no-footprint          skip the footprint section (bench/footprint.mjs: idle RSS, start to
                          ready, peak RSS and p99/p99.9 at fixed rates per Node and flag set)
  --strict                also exit non-zero when a target FAILs
  --time-limit S          abort the whole run after S seconds (full: 5400, smoke: 420)`;

/** Bad command-line input (exit code 2). */
export class UsageError extends Error {
  name = "UsageError";
}

function list(value, allowed, name) {
  const items = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const item of items) {
    if (!allowed.includes(item))
      throw new UsageError(`unknown ${name} "${item}" (allowed: ${allowed.join(", ")})`);
  }
  return allowed.filter((a) => items.includes(a));
}

function positive(value, name) {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--${name} must be a positive number`);
  return n;
}

/** Parse argv into the run's settings; throws with the usage text on bad input. */
export function parseSettings(argv) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        smoke: { type: "boolean", default: false },
        rounds: { type: "string" },
        fresh: { type: "boolean", default: false },
        isolate: { type: "boolean", default: false },
        duration: { type: "string" },
        connections: { type: "string", default: "50" },
        rate: { type: "string", default: "2000" },
        "latency-duration": { type: "string" },
        competitors: { type: "string" },
        cases: { type: "string" },
        variants: { type: "string" },
        generator: { type: "string" },
        upstream: { type: "string" },
        "no-install": { type: "boolean", default: false },
        "no-footprint": { type: "boolean", default: false },
        burst: { type: "string", default: "1000" },
        "ready-samples": { type: "string" },
        out: { type: "string" },
        strict: { type: "boolean", default: false },
        "time-limit": { type: "string" },
        help: { type: "boolean", default: false },
      },
    }));
  } catch (error) {
    throw new UsageError(`${error.message}\n${USAGE}`);
  }
  if (values.help) return { help: USAGE };
  const smoke = values.smoke;
  if (values.generator && !["wrk", "node"].includes(values.generator)) {
    throw new UsageError("--generator must be wrk or node");
  }
  if (values.upstream && !["nginx", "node"].includes(values.upstream)) {
    throw new UsageError("--upstream must be nginx or node");
  }
  return {
    smoke,
    rounds: Math.round(positive(values.rounds ?? (smoke ? 1 : 3), "rounds")),
    fresh: values.fresh,
    isolate: values.isolate,
    durationS: positive(values.duration ?? (smoke ? 1 : 10), "duration"),
    connections: Math.round(positive(values.connections, "connections")),
    rate: positive(values.rate, "rate"),
    latencyDurationS: positive(values["latency-duration"] ?? (smoke ? 1 : 10), "latency-duration"),
    competitors: values.competitors
      ? list(values.competitors, ALL_COMPETITORS, "competitor")
      : ALL_COMPETITORS,
    cases: values.cases
      ? list(values.cases, ALL_CASES, "case")
      : smoke
        ? ["small", "early", "latency"]
        : ALL_CASES,
    variants:
      values.variants === undefined
        ? ALL_VARIANTS
        : values.variants.trim() === "none"
          ? []
          : list(values.variants, ALL_VARIANTS, "variant"),
    generatorChoice: values.generator ?? null,
    upstreamChoice: values.upstream ?? null,
    install: !values["no-install"],
    footprint: !values["no-footprint"],
    burst: Math.round(positive(values.burst, "burst")),
    readySamples: Math.round(positive(values["ready-samples"] ?? (smoke ? 1 : 5), "ready-samples")),
    outDir: values.out ?? null,
    strict: values.strict,
    timeLimitS: positive(values["time-limit"] ?? (smoke ? 420 : 5400), "time-limit"),
    warmupS: smoke ? 0 : 2,
    // Unrecorded seconds at the fixed rate before latency is measured (see bench/fixed-rate.mjs).
    latencyWarmupS: smoke ? 1 : 2,
  };
}
