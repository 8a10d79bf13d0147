/**
 * Built-in closed-loop load generator (the fallback when wrk is not installed): `connections`
 * keep-alive connections, each sending its next request as soon as the previous answer is
 * complete, for `duration` seconds. Latency from send to last body byte.
 *
 *   node bench/load.mjs --url http://127.0.0.1:8080/small [--method POST --body-bytes 65536]
 *     [--connections 50] [--duration 10] [--ca FILE] [--header "Name: value"]…
 * prints `BENCH_RESULT {...}` (same fields as bench/wrk/bench.lua).
 */
import { readFileSync } from "node:fs";
import { createHistogram } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Pool } from "undici";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    method: { type: "string", default: "GET" },
    "body-bytes": { type: "string", default: "0" },
    connections: { type: "string", default: "50" },
    duration: { type: "string", default: "10" },
    ca: { type: "string" },
    header: { type: "string", multiple: true, default: [] },
  },
});
if (!values.url) {
  process.stderr.write(
    "usage: load.mjs --url URL [--method M] [--body-bytes N] [--connections N] [--duration S] [--header 'Name: value']\n",
  );
  process.exit(2);
}

const url = new URL(values.url);
const connections = Number(values.connections);
const durationMs = Number(values.duration) * 1000;
const bodyBytes = Number(values["body-bytes"]);
const body = bodyBytes > 0 ? Buffer.alloc(bodyBytes, "x") : null;
const headers = body ? { "content-type": "application/octet-stream" } : {};
for (const line of values.header) {
  const colon = line.indexOf(":");
  headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
}
const path = url.pathname + url.search;
const pool = new Pool(url.origin, {
  connections,
  pipelining: 1,
  keepAliveTimeout: 60_000,
  connect: values.ca ? { ca: readFileSync(values.ca), rejectUnauthorized: true } : undefined,
});

const histogram = createHistogram();
const result = {
  requests: 0,
  bytes: 0,
  connectErrors: 0,
  readErrors: 0,
  writeErrors: 0,
  statusErrors: 0,
  timeouts: 0,
};

/** One request through `dispatch` with a handler that only counts bytes: the cheapest path. */
function sendOne() {
  return new Promise((resolve) => {
    const started = process.hrtime.bigint();
    let status = 0;
    pool.dispatch(
      { path, method: values.method, headers, body, headersTimeout: 10_000, bodyTimeout: 10_000 },
      {
        onRequestStart() {},
        onResponseStart(_controller, statusCode) {
          status = statusCode;
        },
        onResponseData(_controller, chunk) {
          result.bytes += chunk.length;
        },
        onResponseEnd() {
          result.requests++;
          if (status < 200 || status > 399) result.statusErrors++;
          histogram.record(Math.max(1, Number(process.hrtime.bigint() - started)));
          resolve();
        },
        onResponseError(_controller, error) {
          if (error.code === "UND_ERR_HEADERS_TIMEOUT" || error.code === "UND_ERR_BODY_TIMEOUT")
            result.timeouts++;
          else if (error.code === "ECONNREFUSED" || error.code === "UND_ERR_CONNECT_TIMEOUT")
            result.connectErrors++;
          else result.readErrors++;
          resolve();
        },
      },
    );
  });
}

const startedAt = performance.now();
const deadline = startedAt + durationMs;
async function loop() {
  while (performance.now() < deadline) await sendOne();
}
await Promise.all(Array.from({ length: connections }, loop));
const elapsedMs = performance.now() - startedAt;
await pool.close();

const us = (ns) => Math.round(ns / 1000);
const line = {
  ...result,
  durationUs: Math.round(elapsedMs * 1000),
  p50Us: us(histogram.percentile(50)),
  p90Us: us(histogram.percentile(90)),
  p99Us: us(histogram.percentile(99)),
  maxUs: us(histogram.max),
  meanUs: Number((histogram.mean / 1000).toFixed(1)),
};
process.stdout.write(`BENCH_RESULT ${JSON.stringify(line)}\n`);
