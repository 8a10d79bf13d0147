/**
 * Open-loop fixed-rate load generator (Debian has no wrk2): request i is due at
 * start + i / rate, whether or not earlier ones have answered, and its latency is measured from
 * that intended time — so a stall shows up in the percentiles instead of hiding (no coordinated
 * omission). Requests beyond the free connections queue in the pool and that wait counts too.
 *
 * The first `--warmup` seconds run at the same rate but are not recorded: until V8 has optimised
 * the client's code and its connections are open, a Node generator falls behind the schedule
 * (a ~250 ms backlog at the start, measured) and that would be charged to whatever is measured.
 *
 *   node bench/fixed-rate.mjs --url URL --rate 2000 --duration 10 [--warmup 2] [--connections 64] [--ca FILE]
 * prints `BENCH_RESULT {...}` with `sent`, `requests`, percentiles in µs and `achievedRate`, and
 * `typicalSecondP99Us`: the median over the run's 1-second windows of each window's p99. One
 * machine-wide stall (a VM descheduled for 100 ms, measured here even with no proxy at all) puts
 * hundreds of late requests into a 10-second run and decides its p99; the typical second shows
 * what a proxy adds when that does not happen. Both are reported.
 */
import { readFileSync } from "node:fs";
import { createHistogram } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Pool } from "undici";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    rate: { type: "string", default: "2000" },
    duration: { type: "string", default: "10" },
    warmup: { type: "string", default: "2" },
    connections: { type: "string", default: "64" },
    ca: { type: "string" },
  },
});
if (!values.url) {
  process.stderr.write(
    "usage: fixed-rate.mjs --url URL [--rate R] [--duration S] [--connections N]\n",
  );
  process.exit(2);
}

const url = new URL(values.url);
const rate = Number(values.rate);
const warmupCount = Math.round(rate * Number(values.warmup));
const total = warmupCount + Math.round(rate * Number(values.duration));
const path = url.pathname + url.search;
const pool = new Pool(url.origin, {
  connections: Number(values.connections),
  pipelining: 1,
  keepAliveTimeout: 60_000,
  connect: values.ca ? { ca: readFileSync(values.ca), rejectUnauthorized: true } : undefined,
});
const histogram = createHistogram();
/** One histogram per second of the measured period, by intended send time. */
const windows = [];
const result = { sent: 0, requests: 0, statusErrors: 0, errors: 0 };
let outstanding = 0;
let measuredFromNs = 0n;
let sentAll = false;
let allSent;
const allDone = new Promise((resolve) => {
  allSent = resolve;
});

function send(intendedNs, recorded) {
  outstanding++;
  if (recorded) result.sent++;
  let status = 0;
  const finish = () => {
    if (recorded) {
      const latencyNs = Math.max(1, Number(process.hrtime.bigint() - intendedNs));
      histogram.record(latencyNs);
      const second = Math.floor(Number(intendedNs - measuredFromNs) / 1e9);
      windows[second] ??= createHistogram();
      windows[second].record(latencyNs);
    }
    outstanding--;
    if (outstanding === 0 && sentAll) allSent();
  };
  pool.dispatch(
    { path, method: "GET", headersTimeout: 10_000, bodyTimeout: 10_000 },
    {
      onRequestStart() {},
      onResponseStart(_controller, statusCode) {
        status = statusCode;
      },
      onResponseData() {},
      onResponseEnd() {
        if (recorded) result.requests++;
        if (recorded && (status < 200 || status > 399)) result.statusErrors++;
        finish();
      },
      onResponseError() {
        if (recorded) result.errors++;
        finish();
      },
    },
  );
}

/** Open a few connections (and TLS sessions) first, unrecorded, so the clock starts warm. */
async function prewarm() {
  const one = () =>
    pool
      .request({ path, method: "GET", headersTimeout: 10_000, bodyTimeout: 10_000 })
      .then((response) => response.body.dump())
      .catch(() => {});
  for (let i = 0; i < 3; i++) await Promise.all(Array.from({ length: 8 }, one));
}
await prewarm();

const intervalNs = BigInt(Math.round(1e9 / rate));
const startNs = process.hrtime.bigint();
measuredFromNs = startNs + BigInt(warmupCount) * intervalNs;
let next = 0;
// Tick every millisecond and send everything that has fallen due; each request keeps its own
// intended time, so the timer's jitter is part of the measured latency, as it should be.
function tick() {
  const now = process.hrtime.bigint();
  while (next < total && startNs + BigInt(next) * intervalNs <= now) {
    send(startNs + BigInt(next) * intervalNs, next >= warmupCount);
    next++;
  }
  if (next === total) sentAll = true;
  if (next < total) setTimeout(tick, 1);
}
tick();
const hardLimit = setTimeout(
  () => allSent(),
  (Number(values.warmup) + Number(values.duration) + 15) * 1000,
);
await allDone;
clearTimeout(hardLimit);
const elapsedS = Number(process.hrtime.bigint() - measuredFromNs) / 1e9;
await pool.destroy();

const us = (ns) => Math.round(ns / 1000);
const windowP99s = windows
  .filter((w) => w && w.count > 0)
  .map((w) => w.percentile(99))
  .sort((a, b) => a - b);
const typicalSecondP99Ns =
  windowP99s.length > 0 ? windowP99s[Math.floor((windowP99s.length - 1) / 2)] : 0;
const line = {
  ...result,
  durationUs: Math.round(elapsedS * 1e6),
  achievedRate: Math.round(result.requests / elapsedS),
  p50Us: us(histogram.percentile(50)),
  p90Us: us(histogram.percentile(90)),
  p99Us: us(histogram.percentile(99)),
  p999Us: us(histogram.percentile(99.9)),
  maxUs: us(histogram.max),
  typicalSecondP99Us: us(typicalSecondP99Ns),
  meanUs: Number((histogram.mean / 1000).toFixed(1)),
};
process.stdout.write(`BENCH_RESULT ${JSON.stringify(line)}\n`);
