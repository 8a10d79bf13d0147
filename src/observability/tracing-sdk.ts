/**
 * The OpenTelemetry side of tracing.ts, loaded with `import()` only when tracing is on (with
 * tracing-provider.ts, the only files that import OpenTelemetry): the spans of a request's
 * walk, on a provider configured from the env object the app was given.
 *
 * A request's sampling is decided first, its ids drawn from tracing-ids.ts' pool: one without a
 * parent (most) by its trace id's sampling key against the sampler's root bound, one that
 * continues a client's trace by the provider's sampler. One left out costs its ids and nothing
 * else (UnrecordedServerSpan): its attempts get a `traceparent` and no span (`recorded`);
 * one recorded gets its SERVER and CLIENT spans from tracing-span.ts, which end in the
 * provider's processor like the SDK's own. Only the token spans (rare) are started by the SDK's
 * tracer.
 *
 * Nothing global is registered: no tracer provider, no AsyncLocalStorage context manager (it
 * would cost every async hop of every request), no propagator, no diag logger. Each span is
 * started with its parent passed explicitly; the client's `traceparent` is read with the W3C
 * propagator on an explicit carrier, and ours formatted from the attempt's span context.
 *
 * Secrets: only the attributes set below are recorded — method, path and URL without the
 * query string, host, port, status, upstream name, error code. Never a header, token or
 * credential; the collector headers (often an API key) are never logged either.
 */
import {
  type Attributes,
  type Context,
  defaultTextMapGetter,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  type TraceState,
  trace,
} from "@opentelemetry/api";
import { type InstrumentationScope, W3CTraceContextPropagator } from "@opentelemetry/core";
import {
  type BasicTracerProvider,
  type Sampler,
  SamplingDecision,
} from "@opentelemetry/sdk-trace-base";
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_METHOD_ORIGINAL,
  ATTR_HTTP_REQUEST_RESEND_COUNT,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
} from "@opentelemetry/semantic-conventions";
import { errorMessage } from "../errors.js";
import type { Logger } from "./logger.js";
import type {
  ClientSpan,
  ServerSpan,
  TokenFetchOptions,
  TokenSpan,
  TracedRequest,
  Tracing,
} from "./tracing.js";
import { drawRootIds, newSpanId, newTraceId } from "./tracing-ids.js";
import { createTracerProvider } from "./tracing-provider.js";
import { readTracingSettings, type TracingEnv } from "./tracing-settings.js";
import { RecordedSpan, type SpanSink } from "./tracing-span.js";

/** Our own attribute: the configured upstream a request went to. */
export const ATTR_BEARER_PROXY_UPSTREAM = "bearer_proxy.upstream";

const SCOPE_NAME = "bearer-proxy";

/** Methods semconv knows; others are recorded as `_OTHER` (a client picks any token). */
const KNOWN_METHODS = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "DELETE",
  "CONNECT",
  "OPTIONS",
  "TRACE",
  "PATCH",
  "QUERY",
]);

/** Upstream origins are few (configured); a bound keeps a bug from growing the cache. */
const MAX_CACHED_ORIGINS = 1024;

const propagator = new W3CTraceContextPropagator();

/** What the sampler is shown of a request before it decides: nothing (see TracerProviderParts). */
const NO_ATTRIBUTES: Attributes = Object.freeze({});
const NO_LINKS: [] = [];

/**
 * W3C `traceparent` (version 00) of a span. Our spans carry only the sampled bit, so the flags
 * are `01` or `00`; what the W3C propagator's inject writes, without its carrier and context.
 */
function traceparentOf(traceId: string, spanId: string, traceFlags: number): string {
  return `00-${traceId}-${spanId}-${(traceFlags & TraceFlags.SAMPLED) === 0 ? "00" : "01"}`;
}

interface OriginFacts {
  /** Scheme, host and port only: no credentials. */
  origin: string;
  address: string;
  port: number;
}

export interface SdkTracingOptions {
  env: TracingEnv;
  logger: Logger;
  serviceVersion?: string | undefined;
}

function methodAttributes(attributes: Attributes, method: string): string {
  if (KNOWN_METHODS.has(method)) {
    attributes[ATTR_HTTP_REQUEST_METHOD] = method;
    return method;
  }
  attributes[ATTR_HTTP_REQUEST_METHOD] = "_OTHER";
  attributes[ATTR_HTTP_REQUEST_METHOD_ORIGINAL] = method;
  return "HTTP";
}

function fail(span: Span, errorType: string): void {
  span.setAttribute(ATTR_ERROR_TYPE, errorType);
  span.setStatus({ code: SpanStatusCode.ERROR });
}

class SdkTokenSpan implements TokenSpan {
  private context: Context | undefined;

  constructor(
    readonly span: Span,
    private readonly parent: Context,
  ) {}

  childContext(): Context {
    this.context ??= trace.setSpan(this.parent, this.span);
    return this.context;
  }

  addLink(other: TokenSpan): void {
    if (other instanceof SdkTokenSpan) this.span.addLink({ context: other.span.spanContext() });
  }

  end(errorCode?: string): void {
    if (errorCode !== undefined) fail(this.span, errorCode);
    this.span.end();
  }
}

/** One recorded attempt at the upstream. */
class SdkClientSpan implements ClientSpan {
  constructor(private readonly span: RecordedSpan) {}

  traceparent(): string | undefined {
    const { traceId, spanId, traceFlags } = this.span.spanContext();
    return traceparentOf(traceId, spanId, traceFlags);
  }

  tracestate(): string | undefined {
    return this.span.spanContext().traceState?.serialize();
  }

  end(status?: number, errorCode?: string, protocolVersion?: string): void {
    const { span } = this;
    if (status !== undefined && status > 0)
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
    if (protocolVersion !== undefined)
      span.setAttribute(ATTR_NETWORK_PROTOCOL_VERSION, protocolVersion);
    // Semconv: a client span fails on any 4xx/5xx, named by its status when nothing else.
    if (errorCode !== undefined) span.fail(errorCode);
    else if (status !== undefined && status >= 400) span.fail(String(status));
    span.end();
  }
}

/** A recorded request. */
class SdkServerSpan implements ServerSpan {
  readonly recorded = true;
  readonly traceId: string;
  readonly spanId: string;
  private context: Context | undefined;

  constructor(
    private readonly tracing: SdkTracing,
    readonly span: RecordedSpan,
    private readonly parent: Context,
    /** The first attempt's span id, when drawn with the request's (drawRootIds). */
    private attemptSpanId: string | undefined,
  ) {
    const spanContext = span.spanContext();
    this.traceId = spanContext.traceId;
    this.spanId = spanContext.spanId;
  }

  /** For the token spans, which the SDK's tracer starts as children of this one. */
  childContext(): Context {
    this.context ??= trace.setSpan(this.parent, trace.wrapSpanContext(this.span.spanContext()));
    return this.context;
  }

  /** A span id for the next attempt: the one drawn with the request's first, then fresh ones. */
  nextAttemptSpanId(): string {
    const spanId = this.attemptSpanId ?? newSpanId();
    this.attemptSpanId = undefined;
    return spanId;
  }

  setUpstream(name: string): void {
    this.span.setAttribute(ATTR_BEARER_PROXY_UPSTREAM, name);
  }

  setPath(pathname: string): void {
    this.span.setAttribute(ATTR_URL_PATH, pathname);
  }

  startClientSpan(
    method: string,
    origin: string,
    path: string,
    upstream: string,
    resendCount = 0,
  ): ClientSpan {
    return this.tracing.startClientSpan(this, method, origin, path, upstream, resendCount);
  }

  startTokenSpan(upstream: string): TokenSpan {
    return this.tracing.startTokenWait(this.childContext(), upstream);
  }

  end(status: number, errorCode?: string): void {
    const { span } = this;
    if (status > 0) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
    // Semconv: a server span fails on 5xx only (a 4xx is the client's doing), or on our code.
    if (errorCode !== undefined) span.fail(errorCode);
    else if (status >= 500) span.fail(String(status));
    span.end();
  }
}

/**
 * A request the sampler left out (`NOT_RECORD`): nothing is recorded or exported, so no span,
 * context or attribute is made for it. It keeps its ids — the access line names the trace —
 * and each upstream attempt gets a span id of its own, sent with flags 00 so the upstream's
 * spans still join the trace (what the SDK's non-recording spans did, minus their objects). Its
 * attempts record nothing either: a child of an unrecorded span is not recorded by any sampler
 * we build (TracerProviderParts). So it is its own ClientSpan: an attempt is only the
 * `traceparent` that `startClientSpan` draws.
 */
class UnrecordedServerSpan implements ServerSpan, ClientSpan {
  readonly recorded = false;
  private attemptTraceparent: string | undefined;
  private context: Context | undefined;

  constructor(
    private readonly tracing: SdkTracing,
    readonly traceId: string,
    readonly spanId: string,
    private readonly traceState: TraceState | undefined,
    private readonly parent: Context,
    /** The first attempt's span id, when drawn with the request's (drawRootIds). */
    private attemptSpanId: string | undefined,
  ) {}

  /** For the token spans (rare: a request that waits for a token), as the SDK would parent them. */
  childContext(): Context {
    this.context ??= trace.setSpan(
      this.parent,
      trace.wrapSpanContext({
        traceId: this.traceId,
        spanId: this.spanId,
        traceFlags: TraceFlags.NONE,
        traceState: this.traceState,
      }),
    );
    return this.context;
  }

  setUpstream(): void {}

  setPath(): void {}

  startClientSpan(): ClientSpan {
    const spanId = this.attemptSpanId ?? newSpanId();
    this.attemptSpanId = undefined;
    this.attemptTraceparent = traceparentOf(this.traceId, spanId, TraceFlags.NONE);
    return this;
  }

  traceparent(): string | undefined {
    return this.attemptTraceparent;
  }

  tracestate(): string | undefined {
    return this.traceState?.serialize();
  }

  startTokenSpan(upstream: string): TokenSpan {
    return this.tracing.startTokenWait(this.childContext(), upstream);
  }

  end(): void {}
}

class SdkTracing implements Tracing {
  readonly enabled = true;
  private readonly origins = new Map<string, OriginFacts | null>();

  constructor(
    readonly tracer: Tracer,
    private readonly provider: BasicTracerProvider,
    private readonly sampler: Sampler,
    /** A root request is sampled when its sampling key is below this (TracerProviderParts). */
    private readonly rootBound: number,
    private readonly sink: SpanSink,
    private readonly log: Logger,
  ) {}

  /**
   * Sampling is decided first, with ids drawn here; a request left out costs its ids and
   * nothing else, a recorded one gets a RecordedSpan under those ids.
   */
  startServerSpan(req: TracedRequest): ServerSpan {
    // No traceparent, nothing to continue (the W3C propagator would return the root as is):
    // the sampler's answer for a root is its bound on the trace id's key.
    if (req.headers.traceparent === undefined) {
      const ids = drawRootIds();
      if (ids.samplingKey >= this.rootBound) {
        return new UnrecordedServerSpan(
          this,
          ids.traceId,
          ids.spanId,
          undefined,
          ROOT_CONTEXT,
          ids.attemptSpanId,
        );
      }
      const context: SpanContext = {
        traceId: ids.traceId,
        spanId: ids.spanId,
        traceFlags: TraceFlags.SAMPLED,
      };
      return this.recordedServerSpan(req, context, undefined, undefined, ids.attemptSpanId);
    }
    const parent = propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter);
    const parentSpan = trace.getSpanContext(parent);
    const continued = parentSpan !== undefined && trace.isSpanContextValid(parentSpan);
    const traceId = continued ? parentSpan.traceId : newTraceId();
    const spanId = newSpanId();
    const method = req.method ?? "GET";
    const sampling = this.sampler.shouldSample(
      parent,
      traceId,
      method,
      SpanKind.SERVER,
      NO_ATTRIBUTES,
      NO_LINKS,
    );
    const traceState = sampling.traceState ?? (continued ? parentSpan.traceState : undefined);
    if (sampling.decision === SamplingDecision.NOT_RECORD) {
      return new UnrecordedServerSpan(this, traceId, spanId, traceState, parent, undefined);
    }
    const context: SpanContext = {
      traceId,
      spanId,
      traceFlags:
        sampling.decision === SamplingDecision.RECORD_AND_SAMPLED
          ? TraceFlags.SAMPLED
          : TraceFlags.NONE,
      traceState,
    };
    return this.recordedServerSpan(
      req,
      context,
      continued ? parentSpan : undefined,
      sampling.attributes,
      undefined,
      parent,
    );
  }

  /** A recorded request's SERVER span, under the ids and flags sampling decided on. */
  private recordedServerSpan(
    req: TracedRequest,
    context: SpanContext,
    parentSpan: SpanContext | undefined,
    samplingAttributes: Attributes | undefined,
    attemptSpanId: string | undefined,
    parent: Context = ROOT_CONTEXT,
  ): SdkServerSpan {
    const attributes: Attributes = { [ATTR_URL_SCHEME]: "http" };
    const name = methodAttributes(attributes, req.method ?? "GET");
    if (req.httpVersion !== undefined) attributes[ATTR_NETWORK_PROTOCOL_VERSION] = req.httpVersion;
    if (samplingAttributes !== undefined) Object.assign(attributes, samplingAttributes);
    const span = new RecordedSpan(
      this.sink,
      name,
      SpanKind.SERVER,
      context,
      parentSpan,
      attributes,
    );
    return new SdkServerSpan(this, span, parent, attemptSpanId);
  }

  /**
   * An attempt of a recorded request: recorded too, with the request's flags (a child of a
   * sampled span is sampled by every sampler we build: TracerProviderParts).
   */
  startClientSpan(
    server: SdkServerSpan,
    method: string,
    origin: string,
    path: string,
    upstream: string,
    resendCount: number,
  ): ClientSpan {
    const attributes: Attributes = { [ATTR_BEARER_PROXY_UPSTREAM]: upstream };
    const name = methodAttributes(attributes, method);
    const facts = this.originFacts(origin);
    if (facts) {
      const query = path.indexOf("?");
      attributes[ATTR_URL_FULL] = facts.origin + (query < 0 ? path : path.slice(0, query));
      attributes[ATTR_SERVER_ADDRESS] = facts.address;
      attributes[ATTR_SERVER_PORT] = facts.port;
    }
    if (resendCount > 0) attributes[ATTR_HTTP_REQUEST_RESEND_COUNT] = resendCount;
    const parent = server.span.spanContext();
    const context: SpanContext = {
      traceId: parent.traceId,
      spanId: server.nextAttemptSpanId(),
      traceFlags: parent.traceFlags,
      traceState: parent.traceState,
    };
    return new SdkClientSpan(
      new RecordedSpan(this.sink, name, SpanKind.CLIENT, context, parent, attributes),
    );
  }

  /** The span of a request's wait for a token, child of `parent` (the request's span). */
  startTokenWait(parent: Context, upstream: string): TokenSpan {
    const span = this.tracer.startSpan(
      "token wait",
      { kind: SpanKind.INTERNAL, attributes: { [ATTR_BEARER_PROXY_UPSTREAM]: upstream } },
      parent,
    );
    return new SdkTokenSpan(span, parent);
  }

  startTokenFetchSpan(upstream: string, options: TokenFetchOptions = {}): TokenSpan {
    const { parent: cause } = options;
    const parent =
      cause instanceof SdkTokenSpan ||
      cause instanceof SdkServerSpan ||
      cause instanceof UnrecordedServerSpan
        ? cause.childContext()
        : ROOT_CONTEXT;
    const attributes: Attributes = { [ATTR_BEARER_PROXY_UPSTREAM]: upstream };
    const facts = options.tokenUrl === undefined ? null : this.originFacts(options.tokenUrl);
    if (facts && options.tokenUrl !== undefined) {
      const { pathname } = new URL(options.tokenUrl);
      attributes[ATTR_URL_FULL] = facts.origin + pathname;
      attributes[ATTR_SERVER_ADDRESS] = facts.address;
      attributes[ATTR_SERVER_PORT] = facts.port;
    }
    const span = this.tracer.startSpan(
      "token fetch",
      { kind: SpanKind.CLIENT, attributes },
      parent,
    );
    return new SdkTokenSpan(span, parent);
  }

  /** Scheme://host:port, host and port of a URL, parsed once per origin; null if it isn't one. */
  private originFacts(url: string): OriginFacts | null {
    let facts = this.origins.get(url);
    if (facts !== undefined) return facts;
    try {
      const parsed = new URL(url);
      const port = parsed.port || (parsed.protocol === "https:" ? "443" : "80");
      facts = {
        origin: parsed.origin,
        address: parsed.hostname.replace(/^\[(.*)\]$/, "$1"),
        port: Number(port),
      };
    } catch {
      facts = null;
    }
    if (this.origins.size >= MAX_CACHED_ORIGINS) this.origins.clear();
    this.origins.set(url, facts);
    return facts;
  }

  // Never reject: a collector that is down must not fail the proxy's close. A failed export
  // was reported already (ReportingExporter); a flush timeout is reported here.
  forceFlush(): Promise<void> {
    return this.provider.forceFlush().catch((error) => this.flushFailed(error));
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown().catch((error) => this.flushFailed(error));
  }

  private flushFailed(error: unknown): void {
    this.log.debug({ reason: errorMessage(error) }, "flushing spans failed");
  }
}

/** Tracing with the SDK, configured from `options.env` (see tracing-settings.ts). */
export async function createSdkTracing(options: SdkTracingOptions): Promise<Tracing> {
  const { logger } = options;
  const settings = readTracingSettings(options.env, (message) => logger.warn(message));
  const { provider, sampler, rootBound, resource, processor } = await createTracerProvider(
    settings,
    logger,
    options.serviceVersion,
  );
  const tracer = provider.getTracer(SCOPE_NAME, options.serviceVersion);
  // The SDK tracer's own scope object: the exporter groups spans by scope identity, so ours
  // and the token spans share one scope in the export.
  const scope = (tracer as { instrumentationScope?: InstrumentationScope })
    .instrumentationScope ?? {
    name: SCOPE_NAME,
    version: options.serviceVersion,
  };
  return new SdkTracing(
    tracer,
    provider,
    sampler,
    rootBound,
    { resource, scope, processor },
    logger,
  );
}
