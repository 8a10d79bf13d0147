/**
 * The bench's HTTPS upstream: as cheap as node:https allows, so it measures the proxies, not
 * itself. It checks no credentials (it is the ceiling) but counts requests with and without
 * `Authorization: Bearer …` (or `DPoP …` with a `DPoP` proof, the `dpop` variant) so the bench
 * can prove the proxies injected the header.
 *
 *   node bench/upstream.mjs --cert FILE --key FILE [--port 0]
 * prints `UPSTREAM_READY {"port":N}` once listening.
 *
 * Routes: GET /small (~100 B JSON), GET /1m (1 MiB), POST /read (reads the body, then 200),
 * POST /early (401, or 413 with ?status=413, without reading the body),
 * GET /_bench/stats and POST /_bench/reset (control; not counted).
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    cert: { type: "string" },
    key: { type: "string" },
    port: { type: "string", default: "0" },
  },
});
if (!values.cert || !values.key) {
  process.stderr.write("usage: upstream.mjs --cert FILE --key FILE [--port N]\n");
  process.exit(2);
}

const SMALL = Buffer.from(
  JSON.stringify({ ok: true, service: "bench-upstream", items: [1, 2, 3], note: "small json" }),
);
const ONE_MIB = Buffer.alloc(1024 * 1024, "b");
const SMALL_HEADERS = { "content-type": "application/json", "content-length": SMALL.length };
const BIG_HEADERS = {
  "content-type": "application/octet-stream",
  "content-length": ONE_MIB.length,
};
const EARLY_BODY = Buffer.from('{"error":"invalid_token"}');
const EARLY_HEADERS = { "content-type": "application/json", "content-length": EARLY_BODY.length };

const counts = { total: 0, bearer: 0, plain: 0, bodyBytes: 0 };

function countAuth(req) {
  counts.total++;
  const auth = req.headers.authorization;
  if (auth?.startsWith("Bearer ") && auth.length > 7) counts.bearer++;
  // RFC 9449 §7.1: a DPoP-bound token travels with its proof (a JWS: "ey…"); counted as injected.
  else if (auth?.startsWith("DPoP ") && auth.length > 5 && req.headers.dpop?.startsWith("ey")) {
    counts.bearer++;
  } else counts.plain++;
}

function handle(req, res) {
  const url = req.url ?? "/";
  if (url.startsWith("/_bench/")) return control(url, req, res);
  countAuth(req);
  if (url === "/small") {
    req.resume();
    res.writeHead(200, SMALL_HEADERS);
    res.end(SMALL);
  } else if (url === "/1m") {
    req.resume();
    res.writeHead(200, BIG_HEADERS);
    res.end(ONE_MIB);
  } else if (url === "/read") {
    let received = 0;
    req.on("data", (chunk) => {
      received += chunk.length;
    });
    req.on("end", () => {
      counts.bodyBytes += received;
      const body = Buffer.from(`{"received":${received}}`);
      res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
      res.end(body);
    });
  } else if (url.startsWith("/early")) {
    // The pathology: answer before the request body has been read.
    res.writeHead(url.endsWith("status=413") ? 413 : 401, EARLY_HEADERS);
    res.end(EARLY_BODY);
  } else {
    req.resume();
    res.writeHead(404, SMALL_HEADERS);
    res.end(SMALL);
  }
}

function control(url, req, res) {
  req.resume();
  if (url === "/_bench/reset" && req.method === "POST") {
    counts.total = 0;
    counts.bearer = 0;
    counts.plain = 0;
    counts.bodyBytes = 0;
  }
  const body = Buffer.from(JSON.stringify(counts));
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
}

const server = createServer(
  {
    cert: readFileSync(values.cert),
    key: readFileSync(values.key),
    keepAliveTimeout: 60_000,
    // Keep-alive connections may carry any number of requests.
    maxRequestsPerSocket: 0,
  },
  handle,
);
server.headersTimeout = 30_000;
server.requestTimeout = 60_000;
server.listen(Number(values.port), "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`UPSTREAM_READY ${JSON.stringify({ port: address.port })}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
    setTimeout(() => process.exit(0), 1000).unref();
  });
}
