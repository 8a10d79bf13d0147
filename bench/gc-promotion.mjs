#!/usr/bin/env node
/**
 * What each request leaves to the old generation: bytes promoted by V8's scavenges per request
 * under closed-loop load (small GET, wrk), for plain bearer-proxy, its variants and the minimal
 * undici forwarder, from `--trace-gc-nvp` (the proxy's GC log, read once it has exited).
 *
 * Why it matters: a request's objects should die young, in the scavenge after it ended, as the
 * forwarder's do (~100 B a request promoted: undici's timers). Objects that survive two
 * scavenges are copied twice and then promoted, and the old generation fills with garbage that
 * only a mark-compact frees: issue 33 found plain bearer-proxy promoting ~2.8 KB a request
 * (6–12 ms scavenges, a mark-compact a second) because of one closure per request that was
 * never called (bench/PROFILE.md, "The promoted request"). This script is how such a
 * regression is seen: promoted B/request beside the forwarder's, same machine, same load.
 *
 *   node bench/gc-promotion.mjs [--duration 5] [--variants all|none|k1,k2] [--max-ratio 5]
 * Run it with the Node to measure (e.g. /opt/node24/package/bin/node bench/gc-promotion.mjs).
 * Exits 1 when plain bearer-proxy promotes more than `--max-ratio` × the forwarder per request
 * (default 5: it measured 2–3× after the fix, ~30× before, so the guard catches the defect, not noise).
 * Needs wrk and a built dist/ (nginx as the upstream when installed).
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";

const TRACE = "--trace-gc-nvp";
process.env.BENCH_BEARER_PROXY_NODE_FLAGS = `${process.env.BENCH_BEARER_PROXY_NODE_FLAGS ?? ""} ${TRACE}`;
process.env.BENCH_BASELINE_NODE_FLAGS = `${process.env.BENCH_BASELINE_NODE_FLAGS ?? ""} ${TRACE}`;
// Read by the modules below when they load: imported after the flags are set.
const { startBearerProxy } = await import("./lib/bearer-proxy.mjs");
const { startBackends } = await import("./lib/backends.mjs");
const { startUndiciForwarder } = await import("./lib/competitors.mjs");
const { canPin, stopAllChildren } = await import("./lib/processes.mjs");
const { ALL_VARIANTS, selectVariants, startVariant } = await import("./lib/variants.mjs");
const { ensureTools } = await import("./lib/tools.mjs");

const { values } = parseArgs({
  options: {
    duration: { type: "string", default: "5" },
    variants: { type: "string", default: "all" },
    "max-ratio": { type: "string", default: "5" },
    connections: { type: "string", default: "50" },
  },
});
const seconds = Number(values.duration);
const [proxyCore, loadCore] = canPin() ? [0, 1] : [null, null];

/** Sums the scavenges (`gc=s`) and counts the mark-compacts of a `--trace-gc-nvp` log. */
function readGcLog(text) {
  let promoted = 0;
  let scavenges = 0;
  let scavengeMs = 0;
  let markCompacts = 0;
  for (const line of text.split("\n")) {
    const kind = /\bgc=(\w+)/.exec(line)?.[1];
    if (kind === undefined) continue;
    if (kind !== "s") {
      markCompacts++;
      continue;
    }
    scavenges++;
    promoted += Number(/\bpromoted=(\d+)/.exec(line)?.[1] ?? 0);
    scavengeMs += Number(/\bpause=([\d.]+)/.exec(line)?.[1] ?? 0);
  }
  return { promoted, scavenges, scavengeMs, markCompacts };
}

function wrk(url, durationS, headers = {}) {
  const headerArgs = Object.entries(headers).flatMap(([name, value]) => [
    "-H",
    `${name}: ${value}`,
  ]);
  const command = loadCore === null ? "wrk" : "taskset";
  const pin = loadCore === null ? [] : ["-c", String(loadCore), "wrk"];
  const out = execFileSync(
    command,
    [...pin, "-t1", `-c${values.connections}`, `-d${durationS}s`, ...headerArgs, url],
    { encoding: "utf8" },
  );
  return Number(/(\d+) requests in/.exec(out)?.[1] ?? 0);
}

/** Load the competitor (a 2 s warm-up, then the run), stop it, and read its GC log. */
async function measure(competitor) {
  let log = "";
  competitor.child.stdout.setEncoding("utf8");
  competitor.child.stdout.on("data", (chunk) => {
    log += chunk;
  });
  const url = `${competitor.baseUrl}/small`;
  const requests = wrk(url, 2, competitor.headers) + wrk(url, seconds, competitor.headers);
  // V8 writes the log through stdio's buffer: it is complete once the process has exited.
  await competitor.stop();
  const gc = readGcLog(log);
  return {
    key: competitor.key,
    requests,
    promotedPerRequest: gc.promoted / requests,
    scavenges: gc.scavenges,
    meanScavengeMs: gc.scavenges ? gc.scavengeMs / gc.scavenges : 0,
    markCompacts: gc.markCompacts,
  };
}

const tools = ensureTools({ install: false, log: () => {} });
const dir = await mkdtemp(join(tmpdir(), "bearer-proxy-gc-"));
const rows = [];
try {
  const { certs, control, upstream, emulator } = await startBackends({
    dir,
    core: loadCore,
    nginxPath: tools.nginx.path,
  });
  const startProxy = (configure, tag = "", env = {}) =>
    startBearerProxy({
      core: proxyCore,
      upstream,
      emulator,
      certs,
      dir,
      control,
      configure,
      tag,
      env,
    });
  rows.push(await measure(await startUndiciForwarder({ core: proxyCore, upstream, certs })));
  rows.push(await measure(await startProxy()));
  const keys =
    values.variants === "all"
      ? ALL_VARIANTS
      : values.variants === "none"
        ? []
        : values.variants.split(",");
  const variants = selectVariants(keys);
  // The tracing variants' collector: one sink for the run, started when first asked (start-all.mjs).
  let sink = null;
  const otlpSink = () => {
    sink ??= import("./lib/otlp-sink.mjs").then(({ startOtlpSink }) =>
      startOtlpSink({ core: loadCore }),
    );
    return sink;
  };
  for (const variant of variants) {
    rows.push(await measure(await startVariant({ variant, dir, control, startProxy, otlpSink })));
  }
  await control.close();
} finally {
  await stopAllChildren();
  await rm(dir, { recursive: true, force: true });
}

console.log(`node ${process.version}, ${seconds} s + 2 s warm-up, wrk -c${values.connections}\n`);
console.log(
  "| competitor | requests | promoted B/request | scavenges | mean scavenge ms | mark-compacts |",
);
console.log("|---|---:|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(
    `| ${r.key} | ${r.requests} | ${r.promotedPerRequest.toFixed(0)} | ${r.scavenges} | ${r.meanScavengeMs.toFixed(2)} | ${r.markCompacts} |`,
  );
}
const forwarder = rows.find((r) => r.key === "undici");
const plain = rows.find((r) => r.key === "bearer-proxy");
const ratio = plain.promotedPerRequest / Math.max(1, forwarder.promotedPerRequest);
const maxRatio = Number(values["max-ratio"]);
console.log(
  `\nplain bearer-proxy promotes ${ratio.toFixed(1)}× the forwarder per request (target ≤ ${maxRatio}×): ${ratio <= maxRatio ? "PASS" : "FAIL"}`,
);
process.exitCode = ratio <= maxRatio ? 0 : 1;
