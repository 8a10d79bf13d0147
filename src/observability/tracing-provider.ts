/**
 * The OpenTelemetry tracer provider tracing-sdk.ts spans come from, built from the settings:
 * the sampler, a batch processor, the OTLP/HTTP exporter for the protocol (protobuf, with our
 * encoder, or JSON), and the resource (service name and version, OTEL_RESOURCE_ATTRIBUTES).
 * Loaded with tracing-sdk.ts, only when tracing is on. Nothing is registered globally.
 */
import { type Context, TraceFlags } from "@opentelemetry/api";
import { type ExportResult, ExportResultCode } from "@opentelemetry/core";
import type { CompressionAlgorithm } from "@opentelemetry/otlp-exporter-base";
import type { IExportTraceServiceResponse, ISerializer } from "@opentelemetry/otlp-transformer";
import { defaultResource, type Resource, resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  type ReadableSpan,
  type Sampler,
  type Span,
  type SpanExporter,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from "@opentelemetry/semantic-conventions";
import { loggableUrl } from "../base/loggable-url.js";
import { createLogThrottle } from "./log-throttle.js";
import type { Logger } from "./logger.js";
import { encodeTraceExportRequest } from "./otlp-trace-encoder.js";
import type { TracingSettings } from "./tracing-settings.js";

/** The exporter's component type in the SDK's own metrics (exporter-trace-otlp-proto's). */
const OTLP_HTTP_SPAN_EXPORTER = "otlp_http_span_exporter";

/** Report a failing collector at most this often. */
const EXPORT_FAILURE_LOG_INTERVAL_MS = 60_000;

function buildSampler(settings: TracingSettings): Sampler {
  const ratio = () => new TraceIdRatioBasedSampler(settings.samplerRatio);
  switch (settings.sampler) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return ratio();
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: ratio() });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** Sampled always: every 32-bit sampling key is below it. */
const ALWAYS = 0x1_0000_0000;

/**
 * A request without a parent is sampled when its trace id's sampling key (tracing-ids.ts) is
 * below this bound: what `buildSampler`'s sampler answers for a root, as a number. The ratio is
 * the SDK's TraceIdRatioBasedSampler's own bound (its constructor; a test holds the two equal).
 */
function rootSamplingBound(settings: TracingSettings): number {
  switch (settings.sampler) {
    case "always_off":
    case "parentbased_always_off":
      return 0;
    case "traceidratio":
    case "parentbased_traceidratio":
      return settings.samplerRatio >= 1 ? ALWAYS : Math.floor(settings.samplerRatio * 0xffffffff);
    default:
      return ALWAYS;
  }
}

/**
 * The SDK's OTLP/HTTP exporter (batch transport, retries, gzip, the OTEL_EXPORTER_OTLP_* TLS
 * files), what `exporter-trace-otlp-proto` / `-http` build, with our protobuf encoder
 * (otlp-trace-encoder.ts) in place of the SDK's serializer; JSON keeps the SDK's.
 */
async function buildExporter(settings: TracingSettings): Promise<SpanExporter> {
  const [{ OTLPExporterBase }, nodeHttp, transformer] = await Promise.all([
    import("@opentelemetry/otlp-exporter-base"),
    import("@opentelemetry/otlp-exporter-base/node-http"),
    import("@opentelemetry/otlp-transformer"),
  ]);
  const json = settings.protocol === "http/json";
  const serializer: ISerializer<ReadableSpan[], IExportTraceServiceResponse> = json
    ? transformer.JsonTraceSerializer
    : {
        serializeRequest: (spans) => encodeTraceExportRequest(spans),
        deserializeResponse: (data) =>
          transformer.ProtobufTraceSerializer.deserializeResponse(data),
      };
  // Passed explicitly: the exporter would otherwise read these from process.env only. (It
  // still reads OTEL_EXPORTER_OTLP_*CERTIFICATE / _CLIENT_KEY from process.env itself.)
  const options = nodeHttp.convertLegacyHttpOptions(
    {
      url: settings.url,
      headers: settings.headers,
      timeoutMillis: settings.timeoutMs,
      compression: settings.compression as CompressionAlgorithm,
    },
    "TRACES",
    "v1/traces",
    { "Content-Type": json ? "application/json" : "application/x-protobuf" },
  );
  const delegate = nodeHttp.createOtlpHttpExportDelegate(
    options,
    serializer,
    OTLP_HTTP_SPAN_EXPORTER,
    transformer.TraceExporterMetricsHelper,
    undefined,
  );
  return new OTLPExporterBase<ReadableSpan[]>(delegate);
}

/**
 * Passes spans to `inner` and reports failed exports through our logger, at most once a
 * minute with the count since the last report (OpenTelemetry would tell its global diag
 * logger, which we don't set).
 */
class ReportingExporter implements SpanExporter {
  private readonly failedExports = createLogThrottle(EXPORT_FAILURE_LOG_INTERVAL_MS);
  /** Spans of the failed exports not reported yet (reported with their count). */
  private droppedSpans = 0;
  private readonly queueFullDrops = createLogThrottle(EXPORT_FAILURE_LOG_INTERVAL_MS);
  /** Told how many spans left the batch processor's queue for each export. */
  onExport: (count: number) => void = () => {};

  constructor(
    private readonly inner: SpanExporter,
    private readonly log: Logger,
    private readonly maxQueueSize: number,
  ) {}

  /** The batch processor dropped a span: its queue was full (see QueueWatchingProcessor). */
  queueFull(): void {
    this.queueFullDrops.count();
  }

  /**
   * Drops are told when the queue moves again (the whole stall's count), once a minute at most;
   * at shutdown whatever is left is told regardless.
   */
  private reportQueueFull(final = false): void {
    const droppedSpans = final ? this.queueFullDrops.take() : this.queueFullDrops.takeIfDue();
    if (!droppedSpans) return;
    this.log.warn(
      { droppedSpans, maxQueueSize: this.maxQueueSize },
      "span export queue full: spans dropped (the collector takes them slower than they are made; sample fewer traces or raise OTEL_BSP_MAX_QUEUE_SIZE)",
    );
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.onExport(spans.length);
    this.reportQueueFull();
    this.inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) {
        // Failures not reported yet are told now, with the recovery.
        const failed = this.failedExports.take();
        if (failed > 0) this.report("span export works again", failed, undefined, "info");
      } else {
        this.failedExports.count();
        this.droppedSpans += spans.length;
        const failed = this.failedExports.takeIfDue();
        if (failed !== undefined)
          this.report("span export failed: spans dropped", failed, result.error);
      }
      done(result);
    });
  }

  private report(
    message: string,
    failedExports: number,
    error?: Error,
    level: "warn" | "info" = "warn",
  ): void {
    this.log[level](
      { failedExports, droppedSpans: this.droppedSpans, reason: error?.message },
      message,
    );
    this.droppedSpans = 0;
  }

  shutdown(): Promise<void> {
    this.reportQueueFull(true);
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/**
 * Counts the spans the batch processor drops because its queue is full — a collector slower
 * than the spans made — which the SDK tells only its global diag logger (not set here). It
 * keeps the processor's own rule: a sampled span that ends while `maxQueueSize` spans wait is
 * dropped; the queue shrinks by each batch handed to the exporter (ReportingExporter.onExport,
 * called as the processor takes the batch: our resource has no asynchronous attributes).
 */
class QueueWatchingProcessor implements SpanProcessor {
  private queued = 0;

  constructor(
    private readonly inner: SpanProcessor,
    private readonly exporter: ReportingExporter,
    private readonly maxQueueSize: number,
  ) {
    exporter.onExport = (count) => {
      this.queued = Math.max(0, this.queued - count);
    };
  }

  onStart(span: Span, parentContext: Context): void {
    this.inner.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) !== 0) {
      if (this.queued >= this.maxQueueSize) this.exporter.queueFull();
      else this.queued++;
    }
    this.inner.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

/**
 * The provider, and what tracing-sdk.ts needs to make the request spans itself
 * (tracing-span.ts): the sampler it asks first, the resource, and the processor every span
 * ends in.
 */
export interface TracerProviderParts {
  provider: BasicTracerProvider;
  resource: Resource;
  /** The provider's only processor (batching and export, drops counted). */
  processor: SpanProcessor;
  /**
   * One of the SDK's built-in samplers (buildSampler): they read only the parent and the trace
   * id, never the name, kind or attributes, and give a child the answer its parent got (not
   * recorded under a parent that was not; sampled under a sampled one). tracing-sdk.ts relies
   * on both.
   */
  sampler: Sampler;
  /**
   * The sampler's answer for a request without a parent, as a bound on its sampling key
   * (`rootSamplingBound`): tracing-sdk.ts decides a root request without asking the sampler.
   */
  rootBound: number;
}

/**
 * A provider exporting to the collector `settings` name; announces itself (endpoint, protocol,
 * header names — never their values — sampler) on `logger`.
 */
export async function createTracerProvider(
  settings: TracingSettings,
  logger: Logger,
  serviceVersion: string | undefined,
): Promise<TracerProviderParts> {
  const { batch } = settings;
  const exporter = new ReportingExporter(await buildExporter(settings), logger, batch.maxQueueSize);
  const resource = defaultResource().merge(
    resourceFromAttributes({
      ...(serviceVersion !== undefined ? { [ATTR_SERVICE_VERSION]: serviceVersion } : {}),
      ...settings.resourceAttributes,
      [ATTR_SERVICE_NAME]: settings.serviceName,
    }),
  );
  const batchProcessor = new BatchSpanProcessor(exporter, {
    scheduledDelayMillis: batch.scheduledDelayMs,
    exportTimeoutMillis: batch.exportTimeoutMs,
    maxQueueSize: batch.maxQueueSize,
    maxExportBatchSize: batch.maxExportBatchSize,
  });
  const sampler = buildSampler(settings);
  const processor = new QueueWatchingProcessor(batchProcessor, exporter, batch.maxQueueSize);
  const provider = new BasicTracerProvider({
    resource,
    sampler,
    spanProcessors: [processor],
  });
  logger.info(
    {
      endpoint: loggableUrl(settings.url),
      protocol: settings.protocol,
      // Names only: the values are often API keys.
      headers: Object.keys(settings.headers),
      sampler: settings.sampler,
      samplerRatio: settings.sampler.endsWith("traceidratio") ? settings.samplerRatio : undefined,
      serviceName: settings.serviceName,
    },
    "tracing on: exporting spans over OTLP",
  );
  return { provider, sampler, rootBound: rootSamplingBound(settings), resource, processor };
}
