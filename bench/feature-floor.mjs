/**
 * The floor of a feature's per-request cost: what one request's DPoP proof or span pair costs
 * in a hot loop, in this process, on the node that runs this script, through the real code in
 * dist/. A variant of the bench (lib/variants.mjs) runs the same code inside the proxy, where
 * it also pays for its extra garbage and cache misses, so this is a lower bound: for a plain
 * request costing P µs of CPU, a feature costing F µs reaches at best P / (P + F) of plain's
 * req/s (the proxy is alone on one core: req/s = 1 / CPU per request).
 *
 *   node bench/feature-floor.mjs [--rounds N] [--iterations N] [--warmup N]
 *                                [--only KEYS] [--plain-us P[,P…]] [--added-us F=µs[,…]] [--json]
 *
 * Every row is warmed up, then measured in `--rounds` interleaved rounds (round 1: every row,
 * round 2: every row, …); each round gives CPU µs (process.cpuUsage: every thread, GC helpers
 * included) and wall µs per iteration, reported as min and median over rounds. Tracing rounds
 * yield to the event loop every 50 iterations, so the batch processor exports as it goes, and
 * end with a forceFlush (the export of the round's last spans is in the round). The OTLP sink
 * is another process (lib/otlp-sink.mjs), so receiving spans is not counted. `--json` prints
 * one JSON line instead of the table. `--added-us dpop=31.5,tracing=20` (a variant's added CPU
 * per request from a bench run) adds a line per row of that feature: floor, added, multiple.
 * bench/run.mjs runs this after its matrix for the variants' `floor` rows (lib/variant-floor.mjs).
 * Needs `npm run build` (dist/; `BENCH_BEARER_PROXY_CLI` names another build's cli.js, as for
 * bench/run.mjs).
 */
import { generateKeyPairSync, sign } from "node:crypto";
import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { fromDist } from "./lib/dist.mjs";
import { startOtlpSink } from "./lib/otlp-sink.mjs";
import { median } from "./lib/summarize.mjs";

const { createSdkTracing } = await fromDist("observability/tracing-sdk.js");
const { createDpop } = await fromDist("token/dpop/index.js");

const USAGE = `usage: node bench/feature-floor.mjs [options]
  --rounds N        measured rounds per row, interleaved (7)
  --iterations N    iterations per round (20000; RSA rows a twentieth)
  --warmup N        unmeasured iterations per row first (a quarter of --iterations)
  --only LIST       comma list of row keys or features (dpop, tracing)
  --plain-us LIST   CPU µs of a plain request (comma list): adds the ceiling P / (P + F)
  --added-us LIST   feature=µs (comma list): a variant's added CPU per request in the proxy,
                    set against each row of that feature (added ÷ floor)
  --json            one JSON line on stdout instead of the table`;

const HTU = "https://127.0.0.1:8443/small";
/** An access token the size of a typical JWT (the proof's `ath` hashes it once, then caches). */
const TOKEN = `eyJhbGciOiJSUzI1NiJ9.${"x".repeat(700)}.${"y".repeat(342)}`;
const YIELD_EVERY = 50;
/**
 * Spans queued for export above which a tracing pass waits (idle) for the exporter: the batch
 * processor drops spans beyond its queue (2,048) when the sink answers slower than the loop
 * makes them, and a dropped span skips its export. Half the queue, four batches of 512.
 */
const BACKLOG_WAIT = 1024;

const noop = () => {};
const SILENT_LOGGER = {
  level: "silent",
  trace: noop,
  debug: noop,
  info: noop,
  warn: noop,
  error: noop,
  fatal: noop,
  child: () => SILENT_LOGGER,
};

/**
 * A row: `{ key, feature, label, scale, setup({sink}) }`; `setup` resolves with the run:
 * `{ iterate(), yieldEvery?, backlog?(), flush?(), spansPath?, sampled?, close?() }`
 * (`scale`: the share of `--iterations` it runs: a twentieth for PS256, ~10× an ES256 proof).
 */
function dpopRow(key, algorithm, scale = 1) {
  return {
    key,
    feature: "dpop",
    label: `dpop.proofFor, ${algorithm ?? "ES256"} ephemeral key`,
    scale,
    setup: async () => {
      const dpop = await createDpop(algorithm === undefined ? {} : { algorithm });
      return { iterate: () => dpop.proofFor("GET", HTU, TOKEN), close: () => dpop.close() };
    },
  };
}

/** Bare crypto.sign over the signing input a real proof of `algorithm` has, with a key of its kind. */
function signRow(key, algorithm, encoding = "der") {
  const what =
    algorithm === "ES256"
      ? `ES256, P-256, ${encoding === "der" ? "DER" : "IEEE P1363"}`
      : "Ed25519";
  return {
    key,
    feature: "dpop",
    label: `crypto.sign only (${what}), same input`,
    scale: 1,
    setup: async () => {
      const dpop = await createDpop({ algorithm });
      const proof = dpop.proofFor("GET", HTU, TOKEN);
      dpop.close();
      const input = Buffer.from(proof.slice(0, proof.lastIndexOf(".")), "latin1");
      // What client-auth/jws.ts jwsSigner passes to crypto.sign: ES256 signs DER (then rewrites
      // it as r || s); Node's own P1363 encoding is the row to compare (Node 24 pays twice).
      if (algorithm === "ES256") {
        const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
        const options =
          encoding === "der" ? privateKey : { key: privateKey, dsaEncoding: "ieee-p1363" };
        return { iterate: () => sign("sha256", input, options) };
      }
      const { privateKey } = generateKeyPairSync("ed25519");
      return { iterate: () => sign(null, input, privateKey) };
    },
  };
}

/** The span pair of one proxied small GET, as src/proxy makes it. */
function tracingRow(key, label, env) {
  return {
    key,
    feature: "tracing",
    label,
    scale: 1,
    setup: async ({ sink }) => {
      const tracing = await createSdkTracing({
        env: {
          OTEL_TRACES_EXPORTER: "otlp",
          OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint(key),
          ...env,
        },
        logger: SILENT_LOGGER,
      });
      const req = { headers: { host: "x" }, method: "GET", httpVersion: "1.1" };
      // Read-only look at the SDK's batch queue (private fields of sdk-trace 2.x; without them
      // nothing waits and the exported count tells whether spans were dropped).
      // (tracing-provider.ts wraps the batch processor in one that counts its drops: `inner`.)
      const outer = tracing.provider?._activeSpanProcessor?._spanProcessors?.[0];
      const processor = outer?.inner ?? outer;
      const queued = processor?._finishedSpans;
      return {
        iterate: () => {
          const server = tracing.startServerSpan(req);
          server.setUpstream("api");
          server.setPath("/small");
          const client = server.startClientSpan(
            "GET",
            "https://127.0.0.1:8443",
            "/small?x=1",
            "api",
          );
          // What forward.ts writeTraceContext reads for the upstream request's headers.
          client.traceparent();
          client.tracestate();
          client.end(200, undefined, "1.1");
          server.end(200);
        },
        yieldEvery: YIELD_EVERY,
        backlog: Array.isArray(queued) ? () => processor._finishedSpans.length : undefined,
        flush: () => tracing.forceFlush(),
        spansPath: `/${key}/v1/traces`,
        sampled: env.OTEL_TRACES_SAMPLER === "always_on" ? 1 : Number(env.OTEL_TRACES_SAMPLER_ARG),
        close: () => tracing.shutdown(),
      };
    },
  };
}

const ALWAYS_ON = { OTEL_TRACES_SAMPLER: "always_on" };
const RATIO = { OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" };
const ROWS = [
  dpopRow("dpop-es256", undefined),
  dpopRow("dpop-eddsa", "EdDSA"),
  dpopRow("dpop-ps256", "PS256", 1 / 20),
  signRow("sign-es256", "ES256"),
  signRow("sign-es256-p1363", "ES256", "ieee-p1363"),
  signRow("sign-ed25519", "EdDSA"),
  tracingRow("tracing-protobuf", "span pair, always_on, OTLP http/protobuf", {
    ...ALWAYS_ON,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
  }),
  tracingRow("tracing-json", "span pair, always_on, OTLP http/json", {
    ...ALWAYS_ON,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
  }),
  tracingRow("tracing-ratio-0.1", "span pair, parentbased_traceidratio 0.1, http/protobuf", {
    ...RATIO,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
  }),
];

const yieldToLoop = () => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One pass of `n` iterations: CPU and wall µs per iteration. */
async function pass(run, n) {
  const cpuStart = process.cpuUsage();
  const wallStart = process.hrtime.bigint();
  let waits = 0;
  if (run.yieldEvery === undefined) {
    for (let i = 0; i < n; i++) run.iterate();
  } else {
    for (let i = 0; i < n; i++) {
      run.iterate();
      if ((i + 1) % run.yieldEvery !== 0) continue;
      await yieldToLoop();
      while ((run.backlog?.() ?? 0) > BACKLOG_WAIT) {
        waits++;
        await sleep(1);
      }
    }
  }
  await run.flush?.();
  const wallNs = Number(process.hrtime.bigint() - wallStart);
  const cpu = process.cpuUsage(cpuStart);
  return { cpuUs: (cpu.user + cpu.system) / n, wallUs: wallNs / 1000 / n, waits };
}

function parse(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      rounds: { type: "string", default: "7" },
      iterations: { type: "string", default: "20000" },
      warmup: { type: "string" },
      only: { type: "string" },
      "plain-us": { type: "string" },
      "added-us": { type: "string" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
  });
  const count = (value, name) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer`);
    return n;
  };
  const iterations = count(values.iterations, "iterations");
  const only = values.only
    ?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const rows = only ? ROWS.filter((r) => only.includes(r.key) || only.includes(r.feature)) : ROWS;
  if (rows.length === 0) throw new Error(`--only ${values.only} names no row`);
  const plainUs = (values["plain-us"] ?? "").split(",").filter(Boolean).map(Number);
  if (plainUs.some((p) => !(p > 0))) throw new Error("--plain-us takes positive numbers");
  const addedUs = {};
  for (const pair of (values["added-us"] ?? "").split(",").filter(Boolean)) {
    const [feature, value] = pair.split("=");
    const n = Number(value);
    if (!feature || !(n >= 0)) throw new Error("--added-us takes feature=µs pairs");
    addedUs[feature.trim()] = n;
  }
  return {
    addedUs,
    help: values.help,
    rounds: count(values.rounds, "rounds"),
    iterations,
    warmup:
      values.warmup === undefined ? Math.ceil(iterations / 4) : count(values.warmup, "warmup"),
    rows,
    plainUs,
    json: values.json,
  };
}

/**
 * The sink's counts once the exports still in flight have landed (forceFlush does not wait
 * for an export the batch processor started on its own): up to 2 s for every always-sampled
 * span to arrive.
 */
async function settledSpans(sink, runs) {
  const complete = (received) =>
    runs.every(({ run, done }) => run.sampled !== 1 || (received[run.spansPath] ?? 0) >= 2 * done);
  let received = await sink.spans();
  for (let i = 0; i < 20 && !complete(received); i++) {
    await sleep(100);
    received = await sink.spans();
  }
  return received;
}

/** P / (P + F) for each plain cost P, from the median CPU cost F. */
function ceilings(plainUs, featureUs) {
  return Object.fromEntries(plainUs.map((p) => [p, p / (p + featureUs)]));
}

async function main() {
  const options = parse(process.argv.slice(2));
  if (options.help) return process.stdout.write(`${USAGE}\n`);
  const log = (line) => process.stderr.write(`feature-floor: ${line}\n`);
  const loadBefore = loadavg()[0];
  const needsSink = options.rows.some((r) => r.feature === "tracing");
  const sink = needsSink ? await startOtlpSink() : null;
  const results = [];
  try {
    const runs = [];
    for (const row of options.rows) {
      const run = await row.setup({ sink });
      const n = Math.max(50, Math.ceil(options.iterations * row.scale));
      const warm = Math.max(50, Math.ceil(options.warmup * row.scale));
      await pass(run, warm);
      runs.push({ row, run, n, done: warm, rounds: [] });
    }
    for (let round = 1; round <= options.rounds; round++) {
      for (const entry of runs) {
        entry.rounds.push(await pass(entry.run, entry.n));
        entry.done += entry.n;
      }
      log(`round ${round}/${options.rounds} done`);
    }
    const received = sink ? await settledSpans(sink, runs) : {};
    for (const { row, run, n, done, rounds } of runs) {
      const cpu = rounds.map((r) => r.cpuUs);
      const wall = rounds.map((r) => r.wallUs);
      const result = {
        key: row.key,
        feature: row.feature,
        label: row.label,
        iterations: n,
        cpuUs: { min: Math.min(...cpu), median: median(cpu), rounds: cpu },
        wallUs: { min: Math.min(...wall), median: median(wall) },
        ceilings: ceilings(options.plainUs, median(cpu)),
      };
      const added = options.addedUs[row.feature];
      if (added !== undefined) result.added = { us: added, multiple: added / median(cpu) };
      if (run.spansPath !== undefined) {
        // Two spans per iteration are made; a sampled-out pair is never exported.
        result.spans = {
          made: 2 * done,
          exported: received[run.spansPath] ?? 0,
          sampled: run.sampled,
          // 1 ms sleeps in the measured rounds while the exporter caught up (idle: no CPU).
          backlogWaits: rounds.reduce((sum, r) => sum + r.waits, 0),
          backlogWatched: run.backlog !== undefined,
        };
      }
      results.push(result);
      await run.close?.();
    }
  } finally {
    await sink?.close();
  }
  const meta = {
    node: process.version,
    openssl: process.versions.openssl,
    v8: process.versions.v8,
    cpu: `${cpus().length} × ${cpus()[0]?.model ?? "unknown CPU"}`,
    loadAverage: { before: loadBefore, after: loadavg()[0] },
    rounds: options.rounds,
    warmup: options.warmup,
    plainUs: options.plainUs,
  };
  if (options.json) {
    process.stdout.write(`${JSON.stringify({ ...meta, rows: results })}\n`);
  } else {
    process.stdout.write(`${renderTable(meta, results)}\n`);
  }
}

function renderTable(meta, results) {
  const f = (v, d = 1) => v.toFixed(d);
  const lines = [
    `node ${meta.node} (OpenSSL ${meta.openssl}, V8 ${meta.v8}), ${meta.cpu}; ` +
      `${meta.rounds} rounds, load average ${f(meta.loadAverage.before, 2)} → ${f(meta.loadAverage.after, 2)}`,
    "",
    `| row | what one iteration is | iterations | CPU µs min | CPU µs median | wall µs median |${meta.plainUs.map((p) => ` ceiling at P=${p} µs |`).join("")}`,
    `|---|---|---:|---:|---:|---:|${meta.plainUs.map(() => "---:|").join("")}`,
  ];
  for (const r of results) {
    lines.push(
      `| ${r.key} | ${r.label} | ${r.iterations} | ${f(r.cpuUs.min)} | ${f(r.cpuUs.median)} | ${f(r.wallUs.median)} |` +
        meta.plainUs.map((p) => ` ${f(r.ceilings[p], 2)}× |`).join(""),
    );
  }
  const added = results.filter((r) => r.added);
  if (added.length > 0) lines.push("");
  for (const r of added) {
    lines.push(
      `${r.key}: floor ${f(r.cpuUs.median)} µs, added in the proxy ${f(r.added.us)} µs: ${f(r.added.multiple, 2)}× the floor`,
    );
  }
  const spans = results.filter((r) => r.spans);
  if (spans.length > 0) lines.push("");
  for (const r of spans) {
    const expected = r.spans.made * r.spans.sampled;
    lines.push(
      `${r.key}: ${r.spans.exported} of ${r.spans.made} spans exported ` +
        `(${f((100 * r.spans.exported) / r.spans.made)}%, sampling ${r.spans.sampled} expects ~${Math.round(expected)}); ` +
        (r.spans.backlogWatched
          ? `${r.spans.backlogWaits} × 1 ms waits for the exporter`
          : "export queue not visible: spans may have been dropped"),
    );
  }
  return lines.join("\n");
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`feature-floor: ${error.stack ?? error.message}\n${USAGE}\n`);
    process.exit(1);
  },
);
