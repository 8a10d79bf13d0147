/**
 * An OTLP/HTTP sink for bench/feature-floor.mjs and the bench's tracing variants
 * (lib/variant-tracing.mjs), in a process of its own so that receiving and decoding spans is
 * not counted as the SDK's CPU (feature-floor) or the proxy's. It answers every POST 200 and
 * counts the spans in each body (protobuf or JSON) by request path, so a measurement can check
 * that no span was dropped.
 *
 *   startOtlpSink({core}) → { endpoint(name), spans() → {path: count}, close() }
 *
 * `core` pins it (lib/processes.mjs `spawnPinned`): the bench runs it on the load core, beside
 * wrk and the upstream, never on the proxy's; feature-floor leaves it unpinned (null).
 *
 * Run as a script (what startOtlpSink spawns) it prints `OTLP_SINK_READY {"port":N}`.
 */
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { spawnPinned } from "./processes.mjs";

const SELF = fileURLToPath(import.meta.url);

/** Start the sink process on `core` (null: anywhere); resolves once it listens on 127.0.0.1. */
export async function startOtlpSink({ core = null } = {}) {
  // stdin is the sink's lifeline: it exits when this process does, however that happens.
  const child = spawnPinned(core, process.execPath, [SELF], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const port = await new Promise((resolve, reject) => {
    let buffered = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk) => {
      buffered += chunk;
      const match = /OTLP_SINK_READY (\{.*\})/.exec(buffered);
      if (match) resolve(JSON.parse(match[1]).port);
    });
    child.once("exit", (code) => reject(new Error(`the OTLP sink exited (${code})`)));
  });
  const base = `http://127.0.0.1:${port}`;
  return {
    /** An OTEL_EXPORTER_OTLP_ENDPOINT of its own (spans are counted per name). */
    endpoint: (name) => `${base}/${name}`,
    /** Spans received so far, by request path (`/<name>/v1/traces`). */
    spans: async () => (await fetch(`${base}/spans`)).json(),
    close: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", resolve);
        child.kill("SIGTERM");
      }),
  };
}

/** A protobuf varint at `at`: [value, next offset]. */
function varint(buf, at) {
  let value = 0;
  let scale = 1;
  for (;;) {
    const byte = buf[at++];
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return [value, at];
    scale *= 128;
  }
}

/** Calls `onField(field, start, end)` for each length-delimited field in buf[start, end). */
function lengthDelimited(buf, start, end, onField) {
  let at = start;
  while (at < end) {
    const [tag, next] = varint(buf, at);
    at = next;
    const wireType = tag % 8;
    if (wireType === 0) at = varint(buf, at)[1];
    else if (wireType === 1) at += 8;
    else if (wireType === 5) at += 4;
    else if (wireType === 2) {
      const [length, from] = varint(buf, at);
      onField(Math.floor(tag / 8), from, from + length);
      at = from + length;
    } else throw new Error(`unexpected protobuf wire type ${wireType}`);
  }
}

/**
 * Spans in an ExportTraceServiceRequest: resource_spans = 1 → scope_spans = 2 → spans = 2
 * (opentelemetry-proto trace.proto and trace_service.proto).
 */
function countProtobufSpans(buf) {
  let count = 0;
  lengthDelimited(buf, 0, buf.length, (field, start, end) => {
    if (field !== 1) return;
    lengthDelimited(buf, start, end, (field2, start2, end2) => {
      if (field2 !== 2) return;
      lengthDelimited(buf, start2, end2, (field3) => {
        if (field3 === 2) count++;
      });
    });
  });
  return count;
}

function countJsonSpans(text) {
  let count = 0;
  for (const resource of JSON.parse(text).resourceSpans ?? []) {
    for (const scope of resource.scopeSpans ?? []) count += scope.spans?.length ?? 0;
  }
  return count;
}

function serve() {
  const spans = {};
  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/spans") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(spans));
      return;
    }
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      const json = (req.headers["content-type"] ?? "").includes("json");
      // Answered first (an empty ExportTraceServiceResponse: full success), counted after: the
      // batch processor has one export in flight at a time, and a slow answer makes it drop.
      if (json) res.writeHead(200, { "content-type": "application/json" }).end("{}");
      else res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      const body = Buffer.concat(chunks);
      try {
        const count = json ? countJsonSpans(body.toString("utf8")) : countProtobufSpans(body);
        spans[req.url] = (spans[req.url] ?? 0) + count;
      } catch (error) {
        process.stderr.write(`otlp-sink: cannot count spans in ${req.url}: ${error.message}\n`);
      }
    });
  });
  server.listen(0, "127.0.0.1", () => {
    process.stdout.write(`OTLP_SINK_READY ${JSON.stringify({ port: server.address().port })}\n`);
  });
  process.once("SIGTERM", () => process.exit(0));
  process.stdin.on("end", () => process.exit(0)).resume();
}

if (process.argv[1] === SELF) serve();
