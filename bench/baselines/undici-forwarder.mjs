/**
 * Baseline (c): the minimal Node forwarder — node:http server, one undici Pool to the upstream,
 * `pool.stream` straight into the response, a static Authorization header, TLS verified.
 * Nothing else (no routing, no token cache, no metrics): the best a plain Node proxy does.
 *
 *   node bench/baselines/undici-forwarder.mjs --upstream https://127.0.0.1:N --ca FILE --token T
 * prints `FORWARDER_READY {"port":N}`.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { Pool } from "undici";
import { announceReady, exitOnSignal, readBaselineArgs } from "../lib/baseline-cli.mjs";

const values = readBaselineArgs("undici-forwarder.mjs");

const upstream = new URL(values.upstream);
const pool = new Pool(upstream.origin, {
  connections: 128,
  pipelining: 1,
  keepAliveTimeout: 60_000,
  connect: { ca: readFileSync(values.ca), servername: values.servername, rejectUnauthorized: true },
});
const authorization = `Bearer ${values.token}`;
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

const server = createServer((req, res) => {
  pool.stream(
    {
      path: req.url,
      method: req.method,
      headers: forwardHeaders(req.headers),
      body: hasBody(req) ? req : null,
      opaque: res,
    },
    ({ statusCode, headers, opaque }) => {
      opaque.writeHead(statusCode, responseHeaders(headers));
      return opaque;
    },
    (err) => {
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
exitOnSignal(() => {
  server.closeAllConnections();
  server.close();
  return pool.destroy();
});
