/**
 * The OpenTelemetry side of tracing.ts, loaded with `import()` only when tracing is on (with
 * tracing-provider.ts, the only files that import OpenTelemetry): the spans of a request's
 * walk, on a provider configured from the env object the app was given.
 *
 * Nothing global is registered: no tracer provider, no AsyncLocalStorage context manager (it
 * would cost every async hop of every request), no propagator, no diag logger. Each span is
 * started with its parent context passed explicitly, and the client's `traceparent` is read and
 * ours written with the W3C propagator on explicit carriers.
 *
 * Secrets: only the attributes set below are recorded — method, path and URL without the
 * query string, host, port, status, upstream name, error code. Never a header, token or
 * credential; the collector headers (often an API key) are never logged either.
 */
import {
  type Attributes,
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import type { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";
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
import { createTracerProvider } from "./tracing-provider.js";
import { readTracingSettings, type TracingEnv } from "./tracing-settings.js";

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

interface Carrier {
  traceparent?: string;
  tracestate?: string;
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

class SdkClientSpan implements ClientSpan {
  private carrier: Carrier | undefined;

  constructor(private readonly span: Span) {}

  private injected(): Carrier {
    if (this.carrier === undefined) {
      this.carrier = {};
      propagator.inject(trace.setSpan(ROOT_CONTEXT, this.span), this.carrier, defaultTextMapSetter);
    }
    return this.carrier;
  }

  traceparent(): string | undefined {
    return this.injected().traceparent;
  }

  tracestate(): string | undefined {
    return this.injected().tracestate;
  }

  end(status?: number, errorCode?: string, protocolVersion?: string): void {
    const { span } = this;
    if (span.isRecording()) {
      if (status !== undefined && status > 0)
        span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      if (protocolVersion !== undefined)
        span.setAttribute(ATTR_NETWORK_PROTOCOL_VERSION, protocolVersion);
      // Semconv: a client span fails on any 4xx/5xx, named by its status when nothing else.
      if (errorCode !== undefined) fail(span, errorCode);
      else if (status !== undefined && status >= 400) fail(span, String(status));
    }
    span.end();
  }
}

class SdkServerSpan implements ServerSpan {
  readonly traceId: string;
  readonly spanId: string;
  private context: Context | undefined;

  constructor(
    private readonly tracing: SdkTracing,
    readonly span: Span,
    private readonly parent: Context,
  ) {
    const spanContext = span.spanContext();
    this.traceId = spanContext.traceId;
    this.spanId = spanContext.spanId;
  }

  childContext(): Context {
    this.context ??= trace.setSpan(this.parent, this.span);
    return this.context;
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
    const parent = this.childContext();
    const span = this.tracing.tracer.startSpan(
      "token wait",
      { kind: SpanKind.INTERNAL, attributes: { [ATTR_BEARER_PROXY_UPSTREAM]: upstream } },
      parent,
    );
    return new SdkTokenSpan(span, parent);
  }

  end(status: number, errorCode?: string): void {
    const { span } = this;
    if (span.isRecording()) {
      if (status > 0) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      // Semconv: a server span fails on 5xx only (a 4xx is the client's doing), or on our code.
      if (errorCode !== undefined) fail(span, errorCode);
      else if (status >= 500) fail(span, String(status));
    }
    span.end();
  }
}

class SdkTracing implements Tracing {
  readonly enabled = true;
  private readonly origins = new Map<string, OriginFacts | null>();

  constructor(
    readonly tracer: Tracer,
    private readonly provider: BasicTracerProvider,
    private readonly log: Logger,
  ) {}

  startServerSpan(req: TracedRequest): ServerSpan {
    const parent = propagator.extract(ROOT_CONTEXT, req.headers, defaultTextMapGetter);
    const attributes: Attributes = { [ATTR_URL_SCHEME]: "http" };
    const name = methodAttributes(attributes, req.method ?? "GET");
    if (req.httpVersion !== undefined) attributes[ATTR_NETWORK_PROTOCOL_VERSION] = req.httpVersion;
    const span = this.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    return new SdkServerSpan(this, span, parent);
  }

  startClientSpan(
    server: SdkServerSpan,
    method: string,
    origin: string,
    path: string,
    upstream: string,
    resendCount: number,
  ): ClientSpan {
    const parent = server.childContext();
    // A sampled-out request still gets a span id to send upstream (flags 00), not attributes.
    if (!server.span.isRecording()) {
      return new SdkClientSpan(this.tracer.startSpan(method, { kind: SpanKind.CLIENT }, parent));
    }
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
    const span = this.tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
    return new SdkClientSpan(span);
  }

  startTokenFetchSpan(upstream: string, options: TokenFetchOptions = {}): TokenSpan {
    const { parent: cause } = options;
    const parent =
      cause instanceof SdkTokenSpan || cause instanceof SdkServerSpan
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
  const provider = await createTracerProvider(settings, logger, options.serviceVersion);
  return new SdkTracing(provider.getTracer(SCOPE_NAME, options.serviceVersion), provider, logger);
}
