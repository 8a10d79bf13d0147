/**
 * A real OTLP/HTTP trace receiver on 127.0.0.1 for tests: accepts `POST /v1/traces` as
 * `application/json` or `application/x-protobuf` (optionally gzip), and collects the spans as
 * plain objects. The protobuf side decodes, by hand, the subset of
 * opentelemetry/proto/collector/trace/v1 a trace export uses: @opentelemetry/otlp-transformer
 * only ships an encoder (its generated decoders are test-only), and protobufjs isn't installed.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";

export type AttributeValue =
  | string
  | number
  | boolean
  | bigint
  | Uint8Array
  | null
  | AttributeValue[]
  | { [key: string]: AttributeValue };

export type SpanKindName =
  | "unspecified"
  | "internal"
  | "server"
  | "client"
  | "producer"
  | "consumer";

export interface CollectedLink {
  traceId: string;
  spanId: string;
  attributes: Record<string, AttributeValue>;
}

export interface CollectedEvent {
  name: string;
  attributes: Record<string, AttributeValue>;
}

export interface CollectedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  traceState: string;
  name: string;
  kind: SpanKindName;
  attributes: Record<string, AttributeValue>;
  /** code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  events: CollectedEvent[];
  links: CollectedLink[];
  /** The span's resource attributes. */
  resource: Record<string, AttributeValue>;
  scope: { name: string; version: string };
}

export interface ReceivedExport {
  contentType: string;
  headers: IncomingHttpHeaders;
  spanCount: number;
}

export interface OtlpReceiver {
  /** Base URL, for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends v1/traces). */
  readonly url: string;
  /** Full traces URL, for OTEL_EXPORTER_OTLP_TRACES_ENDPOINT. */
  readonly tracesUrl: string;
  readonly spans: CollectedSpan[];
  readonly exports: ReceivedExport[];
  /** Answer the next `count` exports with `status` instead of 200. */
  failNext(count: number, status?: number): void;
  /** Keep every export waiting for its answer (a stalled collector) until `release()`. */
  hold(): { release(): void };
  /** Resolves with the spans once at least `count` arrived; rejects after `timeoutMs`. */
  waitForSpans(count: number, timeoutMs?: number): Promise<CollectedSpan[]>;
  close(): Promise<void>;
}

const KINDS: SpanKindName[] = [
  "unspecified",
  "internal",
  "server",
  "client",
  "producer",
  "consumer",
];

// ---- protobuf wire format (https://protobuf.dev/programming-guides/encoding/) ----

class Reader {
  pos = 0;
  constructor(private readonly buf: Uint8Array) {}

  get done(): boolean {
    return this.pos >= this.buf.length;
  }

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.buf.length) throw new Error("truncated varint");
      const byte = this.buf[this.pos++]!;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  }

  bytes(): Uint8Array {
    const length = Number(this.varint());
    if (this.pos + length > this.buf.length) throw new Error("truncated field");
    const out = this.buf.subarray(this.pos, this.pos + length);
    this.pos += length;
    return out;
  }

  fixed(size: 4 | 8): Uint8Array {
    const out = this.buf.subarray(this.pos, this.pos + size);
    this.pos += size;
    return out;
  }

  /** Calls `onField` for each field; skips the wire types it doesn't consume. */
  fields(onField: (field: number, wireType: number) => void): void {
    while (!this.done) {
      const tag = Number(this.varint());
      const field = tag >>> 3;
      const wireType = tag & 7;
      const before = this.pos;
      onField(field, wireType);
      if (this.pos === before) this.skip(wireType);
    }
  }

  skip(wireType: number): void {
    if (wireType === 0) this.varint();
    else if (wireType === 1) this.pos += 8;
    else if (wireType === 2) this.bytes();
    else if (wireType === 5) this.pos += 4;
    else throw new Error(`unsupported wire type ${wireType}`);
  }
}

const text = (bytes: Uint8Array) => Buffer.from(bytes).toString("utf8");
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

function toNumber(value: bigint): number | bigint {
  const signed = BigInt.asIntN(64, value);
  return signed >= BigInt(Number.MIN_SAFE_INTEGER) && signed <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(signed)
    : signed;
}

function decodeAnyValue(buf: Uint8Array): AttributeValue {
  const r = new Reader(buf);
  let value: AttributeValue = null;
  r.fields((field) => {
    if (field === 1) value = text(r.bytes());
    else if (field === 2) value = r.varint() !== 0n;
    else if (field === 3) value = toNumber(r.varint());
    else if (field === 4) value = Buffer.from(r.fixed(8)).readDoubleLE(0);
    else if (field === 5) value = decodeArray(r.bytes());
    else if (field === 6) value = decodeKeyValues(new Reader(r.bytes()), 1);
    else if (field === 7) value = r.bytes().slice();
  });
  return value;
}

function decodeArray(buf: Uint8Array): AttributeValue[] {
  const r = new Reader(buf);
  const items: AttributeValue[] = [];
  r.fields((field) => {
    if (field === 1) items.push(decodeAnyValue(r.bytes()));
  });
  return items;
}

/** Repeated KeyValue at `field` of the message `r` reads. */
function decodeKeyValues(r: Reader, field: number): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  r.fields((f) => {
    if (f !== field) return;
    const kv = new Reader(r.bytes());
    let key = "";
    let value: AttributeValue = null;
    kv.fields((k) => {
      if (k === 1) key = text(kv.bytes());
      else if (k === 2) value = decodeAnyValue(kv.bytes());
    });
    out[key] = value;
  });
  return out;
}

function decodeKeyValue(buf: Uint8Array): [string, AttributeValue] {
  const kv = new Reader(buf);
  let key = "";
  let value: AttributeValue = null;
  kv.fields((k) => {
    if (k === 1) key = text(kv.bytes());
    else if (k === 2) value = decodeAnyValue(kv.bytes());
  });
  return [key, value];
}

function decodeSpan(
  buf: Uint8Array,
  resource: Record<string, AttributeValue>,
  scope: { name: string; version: string },
): CollectedSpan {
  const r = new Reader(buf);
  const span: CollectedSpan = {
    traceId: "",
    spanId: "",
    parentSpanId: "",
    traceState: "",
    name: "",
    kind: "unspecified",
    attributes: {},
    status: { code: 0, message: "" },
    events: [],
    links: [],
    resource,
    scope,
  };
  r.fields((field) => {
    switch (field) {
      case 1:
        span.traceId = hex(r.bytes());
        break;
      case 2:
        span.spanId = hex(r.bytes());
        break;
      case 3:
        span.traceState = text(r.bytes());
        break;
      case 4:
        span.parentSpanId = hex(r.bytes());
        break;
      case 5:
        span.name = text(r.bytes());
        break;
      case 6:
        span.kind = KINDS[Number(r.varint())] ?? "unspecified";
        break;
      case 9: {
        const [key, value] = decodeKeyValue(r.bytes());
        span.attributes[key] = value;
        break;
      }
      case 11: {
        const event: CollectedEvent = { name: "", attributes: {} };
        const e = new Reader(r.bytes());
        e.fields((f) => {
          if (f === 2) event.name = text(e.bytes());
          else if (f === 3) {
            const [key, value] = decodeKeyValue(e.bytes());
            event.attributes[key] = value;
          }
        });
        span.events.push(event);
        break;
      }
      case 13: {
        const link: CollectedLink = { traceId: "", spanId: "", attributes: {} };
        const l = new Reader(r.bytes());
        l.fields((f) => {
          if (f === 1) link.traceId = hex(l.bytes());
          else if (f === 2) link.spanId = hex(l.bytes());
          else if (f === 4) {
            const [key, value] = decodeKeyValue(l.bytes());
            link.attributes[key] = value;
          }
        });
        span.links.push(link);
        break;
      }
      case 15: {
        const s = new Reader(r.bytes());
        s.fields((f) => {
          if (f === 2) span.status.message = text(s.bytes());
          else if (f === 3) span.status.code = Number(s.varint());
        });
        break;
      }
    }
  });
  return span;
}

/** ExportTraceServiceRequest → spans. */
export function decodeProtobufTraces(buf: Uint8Array): CollectedSpan[] {
  const spans: CollectedSpan[] = [];
  const request = new Reader(buf);
  request.fields((field) => {
    if (field !== 1) return;
    const resourceSpans = new Reader(request.bytes());
    let resource: Record<string, AttributeValue> = {};
    const scopeSpansList: Uint8Array[] = [];
    resourceSpans.fields((f) => {
      if (f === 1) resource = decodeKeyValues(new Reader(resourceSpans.bytes()), 1);
      else if (f === 2) scopeSpansList.push(resourceSpans.bytes());
    });
    for (const scopeSpansBuf of scopeSpansList) {
      const scopeSpans = new Reader(scopeSpansBuf);
      const scope = { name: "", version: "" };
      const spanBufs: Uint8Array[] = [];
      scopeSpans.fields((f) => {
        if (f === 1) {
          const s = new Reader(scopeSpans.bytes());
          s.fields((g) => {
            if (g === 1) scope.name = text(s.bytes());
            else if (g === 2) scope.version = text(s.bytes());
          });
        } else if (f === 2) spanBufs.push(scopeSpans.bytes());
      });
      for (const spanBuf of spanBufs) spans.push(decodeSpan(spanBuf, resource, scope));
    }
  });
  return spans;
}

// ---- OTLP/JSON (https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding) ----

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: JsonAnyValue[] };
  kvlistValue?: { values?: JsonKeyValue[] };
  bytesValue?: string;
}
interface JsonKeyValue {
  key: string;
  value?: JsonAnyValue;
}

function jsonValue(value: JsonAnyValue | undefined): AttributeValue {
  if (!value) return null;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return toNumber(BigInt(value.intValue));
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue) return (value.arrayValue.values ?? []).map(jsonValue);
  if (value.kvlistValue) return jsonAttributes(value.kvlistValue.values);
  if (value.bytesValue !== undefined)
    return new Uint8Array(Buffer.from(value.bytesValue, "base64"));
  return null;
}

function jsonAttributes(list: JsonKeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const { key, value } of list ?? []) out[key] = jsonValue(value);
  return out;
}

/** JSON ids are hex per the OTLP spec; an exporter sending base64 would show up as non-hex. */
function jsonId(id: string | undefined): string {
  return (id ?? "").toLowerCase();
}

interface JsonSpan {
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
  traceState?: string;
  name?: string;
  kind?: number;
  attributes?: JsonKeyValue[];
  status?: { code?: number; message?: string };
  events?: { name?: string; attributes?: JsonKeyValue[] }[];
  links?: { traceId?: string; spanId?: string; attributes?: JsonKeyValue[] }[];
}

export function decodeJsonTraces(body: string): CollectedSpan[] {
  const request = JSON.parse(body) as {
    resourceSpans?: {
      resource?: { attributes?: JsonKeyValue[] };
      scopeSpans?: { scope?: { name?: string; version?: string }; spans?: JsonSpan[] }[];
    }[];
  };
  const spans: CollectedSpan[] = [];
  for (const rs of request.resourceSpans ?? []) {
    const resource = jsonAttributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      const scope = { name: ss.scope?.name ?? "", version: ss.scope?.version ?? "" };
      for (const s of ss.spans ?? []) {
        spans.push({
          traceId: jsonId(s.traceId),
          spanId: jsonId(s.spanId),
          parentSpanId: jsonId(s.parentSpanId),
          traceState: s.traceState ?? "",
          name: s.name ?? "",
          kind: KINDS[s.kind ?? 0] ?? "unspecified",
          attributes: jsonAttributes(s.attributes),
          status: { code: s.status?.code ?? 0, message: s.status?.message ?? "" },
          events: (s.events ?? []).map((e) => ({
            name: e.name ?? "",
            attributes: jsonAttributes(e.attributes),
          })),
          links: (s.links ?? []).map((l) => ({
            traceId: jsonId(l.traceId),
            spanId: jsonId(l.spanId),
            attributes: jsonAttributes(l.attributes),
          })),
          resource,
          scope,
        });
      }
    }
  }
  return spans;
}

// ---- the server ----

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: CollectedSpan[] = [];
  const exports: ReceivedExport[] = [];
  const waiters = new Set<() => void>();
  let failCount = 0;
  let failStatus = 503;
  let held: (() => void)[] | undefined;

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => (held ? held.push(answer) : answer()));
    function answer(): void {
      const contentType = (req.headers["content-type"] ?? "").split(";")[0]!.trim();
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      if (failCount > 0) {
        failCount--;
        res.writeHead(failStatus, { "content-type": "text/plain" }).end("failing on purpose");
        return;
      }
      let body = Buffer.concat(chunks);
      let received: CollectedSpan[];
      try {
        if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
        if (contentType === "application/json") received = decodeJsonTraces(body.toString("utf8"));
        else if (contentType === "application/x-protobuf") received = decodeProtobufTraces(body);
        else {
          res.writeHead(415).end();
          return;
        }
      } catch (err) {
        res.writeHead(400, { "content-type": "text/plain" }).end(String(err));
        return;
      }
      exports.push({ contentType, headers: req.headers, spanCount: received.length });
      spans.push(...received);
      // An empty ExportTraceServiceResponse in the request's encoding.
      if (contentType === "application/json") {
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      } else {
        res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      }
      for (const wake of waiters) wake();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    tracesUrl: `${url}/v1/traces`,
    spans,
    exports,
    failNext(count, status = 503) {
      failCount = count;
      failStatus = status;
    },
    hold() {
      held ??= [];
      return {
        release() {
          const waiting = held ?? [];
          held = undefined;
          for (const answer of waiting) answer();
        },
      };
    },
    waitForSpans(count, timeoutMs = 5000) {
      if (spans.length >= count) return Promise.resolve(spans);
      return new Promise((resolve, reject) => {
        const check = () => {
          if (spans.length < count) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(spans);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`waited ${timeoutMs} ms for ${count} spans, got ${spans.length}`));
        }, timeoutMs);
        waiters.add(check);
      });
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
