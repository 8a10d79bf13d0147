/**
 * Baseline (c): the minimal Node forwarder — node:http server, one undici Pool to the upstream,
 * `pool.stream` straight into the response, a static Authorization header, TLS verified.
 * Nothing else (no routing, no token cache, no metrics): the best a plain Node proxy does.
 *
 *   node bench/baselines/undici-forwarder.mjs --upstream https://127.0.0.1:N --ca FILE --token T
 *     [--feature dpop|tracing]
 * prints `FORWARDER_READY {"port":N}`.
 *
 * `--feature` adds one bearer-proxy feature's own code from dist/ per request, and nothing else
 * of bearer-proxy (issue 33: the feature's floor *in place*, beside a loop's floor):
 *   - dpop: `Authorization: DPoP <token>` and a fresh proof (`dpop.proofFor`, an ephemeral
 *     P-256 key, as `dpop: {}`) on every upstream request;
 *   - tracing: the SERVER and CLIENT span pair bearer-proxy makes, `traceparent` sent upstream,
 *     both ended when the response is; configured from the OTEL_* environment like the proxy.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { Pool } from "undici";
import { announceReady, exitOnSignal, readBaselineArgs } from "../lib/baseline-cli.mjs";
import { fromDist } from "../lib/dist.mjs";

const values = readBaselineArgs("undici-forwarder.mjs");

const upstream = new URL(values.upstream);
const pool = new Pool(upstream.origin, {
  connections: 128,
  pipelining: 1,
  keepAliveTimeout: 60_000,
  connect: { ca: readFileSync(values.ca), servername: values.servername, rejectUnauthorized: true },
});
const feature = await loadFeature(values.feature);
const authorization = feature.dpop
  ? feature.dpop.authorization(values.token)
  : `Bearer ${values.token}`;
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "host",
  "authorization",
]);

function forwardHeaders(raw) {
  const headers = {};
  for (const name in raw) {
    if (!HOP_BY_HOP.has(name)) headers[name] = raw[name];
  }
  headers.host = upstream.host;
  headers.authorization = authorization;
  return headers;
}

function responseHeaders(raw) {
  const headers = {};
  for (const name in raw) {
    if (!HOP_BY_HOP.has(name)) headers[name] = raw[name];
  }
  return headers;
}

function hasBody(req) {
  return (
    req.headers["content-length"] !== undefined || req.headers["transfer-encoding"] !== undefined
  );
}

/** The feature's code from dist/ (the build bench/run.mjs measures), or nothing. */
async function loadFeature(name) {
  if (name === undefined) return {};
  if (name === "dpop") {
    const { createDpop } = await fromDist("token/dpop/index.js");
    return { dpop: await createDpop({}) };
  }
  if (name === "tracing") {
    const { createSdkTracing } = await fromDist("observability/tracing-sdk.js");
    const { createLogger } = await fromDist("observability/logger.js");
    const logger = createLogger({ level: "warn", format: "json" });
    return { tracing: await createSdkTracing({ env: process.env, logger }) };
  }
  process.stderr.write(`undici-forwarder.mjs: unknown --feature ${name} (dpop, tracing)\n`);
  process.exit(2);
}

const server = createServer((req, res) => {
  const headers = forwardHeaders(req.headers);
  let span;
  let attempt;
  if (feature.dpop)
    headers.dpop = feature.dpop.proofFor(req.method, upstream.origin + req.url, values.token);
  if (feature.tracing) {
    span = feature.tracing.startServerSpan(req);
    span.setUpstream("bench");
    span.setPath(req.url);
    attempt = span.startClientSpan(req.method, upstream.origin, req.url, "bench");
    headers.traceparent = attempt.traceparent();
    const tracestate = attempt.tracestate();
    if (tracestate !== undefined) headers.tracestate = tracestate;
  }
  pool.stream(
    {
      path: req.url,
      method: req.method,
      headers,
      body: hasBody(req) ? req : null,
      opaque: res,
    },
    ({ statusCode, headers, opaque }) => {
      attempt?.end(statusCode, undefined, "1.1");
      opaque.writeHead(statusCode, responseHeaders(headers));
      return opaque;
    },
    (err) => {
      span?.end(err ? 502 : res.statusCode);
      if (!err) return;
      if (!res.headersSent) {
        res.writeHead(502, { "content-type": "text/plain" });
        res.end("bad gateway\n");
      } else {
        res.destroy(err);
      }
    },
  );
});
server.keepAliveTimeout = 60_000;
server.listen(Number(values.port), "127.0.0.1", () => {
  announceReady("FORWARDER_READY", server.address().port);
});
exitOnSignal(async () => {
  server.closeAllConnections();
  server.close();
  // Queued spans are exported before exit, as bearer-proxy's shutdown does.
  await feature.tracing?.shutdown();
  feature.dpop?.close();
  return pool.destroy();
});
