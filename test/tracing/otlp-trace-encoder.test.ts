/**
 * Our OTLP/protobuf encoder (src/observability/otlp-trace-encoder.ts) writes, byte for byte,
 * what the SDK's ProtobufTraceSerializer writes for the same spans: the proxy's own recorded
 * spans, the SDK tracer's spans (events, links, trace state, status messages, remote parents),
 * every attribute value type (strings of any script and length, int64 edge cases, doubles,
 * booleans, bytes, arrays, key-value lists, undefined), times across the fixed64 range,
 * several resources and scopes, and an export larger than the encoder's first buffer.
 */
import { type Attributes, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { TraceState } from "@opentelemetry/core";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { encodeTraceExportRequest } from "../../src/observability/otlp-trace-encoder.js";
import { RecordedSpan, type SpanSink } from "../../src/observability/tracing-span.js";
import { seededRandom } from "../token/helpers.js";

function expectSameBytes(spans: ReadableSpan[]): void {
  const ours = Buffer.from(encodeTraceExportRequest(spans));
  const sdk = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans) ?? new Uint8Array());
  expect(ours.length).toBe(sdk.length);
  expect(ours.equals(sdk)).toBe(true);
}

const STRINGS = [
  "",
  "GET",
  "http.request.method",
  "https://api.example.test/v1/items",
  "héllo wörld",
  "日本語のテキスト",
  "emoji 🚀 and more",
  "lone \ud800 surrogate",
  "x".repeat(127),
  "y".repeat(128),
  "z".repeat(300),
  "é".repeat(70),
];

const NUMBERS = [
  0,
  -0,
  1,
  127,
  128,
  300,
  2 ** 31,
  2 ** 32 - 1,
  2 ** 32,
  2 ** 40 + 5,
  2 ** 53 - 1,
  2 ** 53 + 2,
  2 ** 62,
  2 ** 63,
  1e20,
  -1,
  -128,
  -(2 ** 32),
  -(2 ** 40) - 3,
  -(2 ** 63),
  0.5,
  -3.25,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
];

function randomValue(random: () => number, depth = 0): unknown {
  const kind = Math.floor(random() * (depth > 1 ? 4 : 7));
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  switch (kind) {
    case 0:
      return pick(STRINGS);
    case 1:
      return pick(NUMBERS);
    case 2:
      return random() < 0.5;
    case 3:
      return Uint8Array.from({ length: Math.floor(random() * 40) }, () => random() * 256);
    case 4:
      return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
    case 5: {
      const object: Record<string, unknown> = {};
      for (let i = 0; i < 3; i++) object[pick(STRINGS)] = randomValue(random, depth + 1);
      return object;
    }
    default:
      return undefined;
  }
}

function randomAttributes(random: () => number, count: number): Attributes {
  const attributes: Record<string, unknown> = {};
  for (let i = 0; i < count; i++)
    attributes[`${STRINGS[i % STRINGS.length]}.${i}`] = randomValue(random);
  return attributes as Attributes;
}

function hex(random: () => number, bytes: number): string {
  let out = "";
  for (let i = 0; i < bytes; i++)
    out += Math.floor(random() * 256)
      .toString(16)
      .padStart(2, "0");
  return out;
}

function sinkFor(resourceName: string, scopeName: string, version?: string): SpanSink {
  return {
    resource: resourceFromAttributes({ "service.name": resourceName }),
    scope: { name: scopeName, version },
    processor: {
      onStart: () => {},
      onEnd: () => {},
      forceFlush: async () => {},
      shutdown: async () => {},
    },
  };
}

/** A sampled INTERNAL span without a parent, not ended. */
function rootSpan(
  random: () => number,
  sink: SpanSink,
  name: string,
  attributes: Attributes,
): RecordedSpan {
  const context = { traceId: hex(random, 16), spanId: hex(random, 8), traceFlags: 1 };
  return new RecordedSpan(sink, name, SpanKind.INTERNAL, context, undefined, { ...attributes });
}

/** The proxy's own SERVER and CLIENT spans, as tracing-sdk.ts makes them. */
function recordedPair(random: () => number, sink: SpanSink, status: number): RecordedSpan[] {
  const traceId = hex(random, 16);
  const serverContext = { traceId, spanId: hex(random, 8), traceFlags: 1 };
  const server = new RecordedSpan(sink, "GET", SpanKind.SERVER, serverContext, undefined, {
    "url.scheme": "http",
    "http.request.method": "GET",
    "network.protocol.version": "1.1",
  });
  const client = new RecordedSpan(
    sink,
    "GET",
    SpanKind.CLIENT,
    { traceId, spanId: hex(random, 8), traceFlags: 1 },
    serverContext,
    {
      "bearer_proxy.upstream": "api",
      "http.request.method": "GET",
      "url.full": "https://api.example.test/v1/items",
      "server.address": "api.example.test",
      "server.port": 443,
    },
  );
  client.setAttribute("http.response.status_code", status);
  if (status >= 500) client.fail(String(status));
  client.end();
  server.setAttribute("url.path", "/v1/items");
  server.setAttribute("http.response.status_code", status);
  server.end();
  return [server, client];
}

/** Spans from the SDK's own tracer (the proxy's token spans are these). */
function sdkSpans(random: () => number): ReadableSpan[] {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "sdk", "deployment.environment": "test" }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("bearer-proxy", "1.2.3");
  const remoteParent = trace.setSpanContext(ROOT_CONTEXT, {
    traceId: hex(random, 16),
    spanId: hex(random, 8),
    traceFlags: 1,
    isRemote: true,
    traceState: new TraceState("vendor=value,other=x"),
  });
  const first = tracer.startSpan(
    "token fetch",
    { kind: SpanKind.CLIENT, attributes: randomAttributes(random, 8) },
    remoteParent,
  );
  first.addEvent("retry", { attempt: 2, reason: "reset" });
  first.addEvent("no attributes");
  first.setStatus({ code: SpanStatusCode.ERROR, message: "token endpoint said no — ünïcödé" });
  first.end();
  const second = tracer.startSpan("token wait", {
    kind: SpanKind.INTERNAL,
    links: [
      {
        context: {
          traceId: hex(random, 16),
          spanId: hex(random, 8),
          traceFlags: 0,
          isRemote: true,
          traceState: new TraceState("a=b"),
        },
        attributes: { why: "joined" },
      },
      { context: { traceId: hex(random, 16), spanId: hex(random, 8), traceFlags: 1 } },
    ],
  });
  second.end();
  const other = provider.getTracer("other-scope");
  const third = other.startSpan("internal", {
    attributes: { "": "", n: -1, big: 2 ** 60, flag: false },
  });
  third.end([1_700_000_000, 999_999_999]);
  return exporter.getFinishedSpans();
}

describe("the OTLP/protobuf encoder", () => {
  it("encodes the proxy's recorded spans exactly as the SDK does", () => {
    const random = seededRandom(1);
    const sink = sinkFor("bearer-proxy", "bearer-proxy", "0.1.0");
    const spans = [200, 204, 404, 502, 503].flatMap((status) => recordedPair(random, sink, status));
    expectSameBytes(spans);
  });

  it("encodes the SDK tracer's spans exactly as the SDK does: events, links, trace state, status, remote parents", () => {
    expectSameBytes(sdkSpans(seededRandom(2)));
  });

  it("encodes every attribute value type exactly as the SDK does (600 random attribute sets)", () => {
    const random = seededRandom(3);
    const sink = sinkFor("fuzz", "fuzz");
    for (let round = 0; round < 60; round++) {
      const spans: ReadableSpan[] = [];
      for (let i = 0; i < 10; i++) {
        spans.push(
          new RecordedSpan(
            sink,
            STRINGS[(round + i) % STRINGS.length]!,
            (i % 5) as SpanKind,
            { traceId: hex(random, 16), spanId: hex(random, 8), traceFlags: i % 2 },
            undefined,
            randomAttributes(random, 1 + (i % 7)),
          ),
        );
      }
      for (const span of spans) (span as RecordedSpan).end();
      expectSameBytes(spans);
    }
  });

  it("encodes times across the fixed64 range exactly as the SDK does", () => {
    const random = seededRandom(4);
    const sink = sinkFor("times", "times");
    const seconds = [0, 1, 65_535, 65_536, 1_700_000_000, 1_764_000_000, 4_294_967_296, 2 ** 34];
    const spans = seconds.map((second) => {
      const span = rootSpan(random, sink, "t", {});
      const time: [number, number] = [second, Math.floor(random() * 1e9)];
      Object.assign(span, { startTime: time, endTime: [second, 999_999_999], ended: true });
      return span;
    });
    expectSameBytes(spans);
  });

  it("groups several resources and scopes the way the SDK does, schema URLs included", () => {
    const random = seededRandom(5);
    const a = sinkFor("a", "scope-1", "1");
    const b = sinkFor("b", "scope-2");
    const withSchema: SpanSink = {
      ...a,
      resource: resourceFromAttributes({ "service.name": "c" }, { schemaUrl: "https://schema/1" }),
      scope: { name: "scoped", version: "2", schemaUrl: "https://schema/scope" },
    };
    const spans = [
      ...recordedPair(random, a, 200),
      ...recordedPair(random, b, 500),
      ...recordedPair(random, a, 201),
      ...recordedPair(random, withSchema, 200),
      ...sdkSpans(random),
    ];
    expectSameBytes(spans);
  });

  it("grows past its first buffer and keeps no bytes of one export in the next", () => {
    const random = seededRandom(6);
    const sink = sinkFor("big", "big");
    const spans: ReadableSpan[] = [];
    for (let i = 0; i < 600; i++) spans.push(...recordedPair(random, sink, 200));
    const huge = rootSpan(random, sink, "huge", {
      long: "w".repeat(200_000),
      wide: "ü".repeat(20_000),
    });
    huge.end();
    spans.push(huge);
    expectSameBytes(spans);
    const small = recordedPair(random, sink, 200);
    expectSameBytes(small);
    expect(encodeTraceExportRequest([])).toEqual(new Uint8Array());
  });
});
