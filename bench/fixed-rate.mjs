/**
 * Open-loop fixed-rate load generator (Debian has no wrk2): request i is due at
 * start + i / rate, whether or not earlier ones have answered, and its latency is measured from
 * that intended time — so a stall shows up in the percentiles instead of hiding (no coordinated
 * omission). Requests beyond the free connections queue in the pool and that wait counts too.
 *
 *   node bench/fixed-rate.mjs --url URL --rate 2000 --duration 10 [--connections 64] [--ca FILE]
 * prints `BENCH_RESULT {...}` with `sent`, `requests`, percentiles in µs and `achievedRate`.
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
const total = Math.round(rate * Number(values.duration));
const path = url.pathname + url.search;
const pool = new Pool(url.origin, {
  connections: Number(values.connections),
  pipelining: 1,
  keepAliveTimeout: 60_000,
  connect: values.ca ? { ca: readFileSync(values.ca), rejectUnauthorized: true } : undefined,
});
const histogram = createHistogram();
const result = { sent: 0, requests: 0, statusErrors: 0, errors: 0 };
let outstanding = 0;
let allSent;
const allDone = new Promise((resolve) => {
  allSent = resolve;
});

function send(intendedNs) {
  outstanding++;
  result.sent++;
  let status = 0;
  const finish = () => {
    histogram.record(Math.max(1, Number(process.hrtime.bigint() - intendedNs)));
    outstanding--;
    if (outstanding === 0 && result.sent === total) allSent();
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
        result.requests++;
        if (status < 200 || status > 399) result.statusErrors++;
        finish();
      },
      onResponseError() {
        result.errors++;
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
let next = 0;
// Tick every millisecond and send everything that has fallen due; each request keeps its own
// intended time, so the timer's jitter is part of the measured latency, as it should be.
function tick() {
  const now = process.hrtime.bigint();
  while (next < total && startNs + BigInt(next) * intervalNs <= now) {
    send(startNs + BigInt(next) * intervalNs);
    next++;
  }
  if (next < total) setTimeout(tick, 1);
}
tick();
const hardLimit = setTimeout(() => allSent(), (Number(values.duration) + 15) * 1000);
await allDone;
clearTimeout(hardLimit);
const elapsedS = Number(process.hrtime.bigint() - startNs) / 1e9;
await pool.destroy();

const us = (ns) => Math.round(ns / 1000);
const line = {
  ...result,
  durationUs: Math.round(elapsedS * 1e6),
  achievedRate: Math.round(result.requests / elapsedS),
  p50Us: us(histogram.percentile(50)),
  p90Us: us(histogram.percentile(90)),
  p99Us: us(histogram.percentile(99)),
  p999Us: us(histogram.percentile(99.9)),
  maxUs: us(histogram.max),
  meanUs: Number((histogram.mean / 1000).toFixed(1)),
};
process.stdout.write(`BENCH_RESULT ${JSON.stringify(line)}\n`);
