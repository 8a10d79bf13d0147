/**
 * Tracing at the edges of a request's walk: one SERVER span per proxied request (continuing
 * the client's W3C `traceparent`), one CLIENT span per upstream attempt (the 401 replay and
 * the reset retry are attempts of their own), and token spans in the request's trace when it
 * waits for a token. The walk only sees the small interfaces below.
 *
 * Off (the default) costs nothing: `createTracing` returns `NOOP_TRACING` without loading any
 * OpenTelemetry module, and every span it hands out is one shared constant. On
 * (`OTEL_TRACES_EXPORTER=otlp`, or `tracing.exporter: otlp`), the SDK is loaded once, at start,
 * through `tracing-sdk.ts` (with `tracing-provider.ts`, the only files that import
 * OpenTelemetry). No global is registered (tracer provider, context manager, propagator, diag
 * logger): parents are passed explicitly, so several apps can trace in one process.
 *
 * The hot-path methods take positional arguments, not option objects: with tracing off a call
 * allocates nothing.
 */
import type { Logger } from "./logger.js";
import { decideTracing, type TracingConfig, type TracingEnv } from "./tracing-settings.js";

export type { TracingConfig, TracingEnv } from "./tracing-settings.js";

/** The parts of an IncomingMessage a server span reads (its headers are never recorded). */
export interface TracedRequest {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly method?: string | undefined;
  /** `1.1`, `1.0`: `network.protocol.version`. */
  readonly httpVersion?: string | undefined;
}

/** A span of the token's life as seen by a request, or a token fetch. */
export interface TokenSpan {
  /**
   * Links this span to `other`: a request's token wait points at the fetch it waits on when it
   * didn't start it (a background refresh, in a trace of its own, or another request's).
   */
  addLink(other: TokenSpan): void;
  /** Ends the span; an error code (`token_unavailable`, …) marks it failed. */
  end(errorCode?: string): void;
}

/** One attempt at the upstream. */
export interface ClientSpan {
  /**
   * The `traceparent` value to send upstream (this span as parent; flags `00` when sampled
   * out), or undefined when tracing is off: then the client's own field goes through untouched.
   */
  traceparent(): string | undefined;
  /** The `tracestate` to send with it (undefined: send none). */
  tracestate(): string | undefined;
  /**
   * Ends the attempt. `status`: the upstream's status, if it answered (0 or undefined if not);
   * `errorCode`: why the attempt failed (`upstream_unreachable`, …); `protocolVersion`: the
   * HTTP version spoken with the upstream (`1.1`, `2`).
   */
  end(status?: number, errorCode?: string, protocolVersion?: string): void;
}

/** The request as a whole. */
export interface ServerSpan {
  /**
   * False when the request is not recorded (tracing off, or the sampler left it out): its
   * attempts then only need their `traceparent` written, no CLIENT span of their own.
   */
  readonly recorded: boolean;
  /** Hex ids for the access line; empty strings when tracing is off. */
  readonly traceId: string;
  readonly spanId: string;
  /** The upstream the request was routed to (`bearer_proxy.upstream`). */
  setUpstream(name: string): void;
  /** The request's path without its query string (`url.path`). */
  setPath(pathname: string): void;
  /**
   * Starts an upstream attempt, child of this span. `origin`: the upstream's origin
   * (`https://host:port`); `path`: the path sent upstream — its query string is cut here,
   * never recorded. `resendCount`: 0 for the first attempt, 1 for the 401 replay or the retry.
   */
  startClientSpan(
    method: string,
    origin: string,
    path: string,
    upstream: string,
    resendCount?: number,
  ): ClientSpan;
  /** Starts the span of this request's wait for a token (child of this span). */
  startTokenSpan(upstream: string): TokenSpan;
  /**
   * Ends the request: the status the client got, and the proxy's error code when the proxy
   * failed it (`upstream_unreachable`, `token_unavailable`, `client_closed`, …).
   */
  end(status: number, errorCode?: string): void;
}

export interface TokenFetchOptions {
  /**
   * The span that caused the fetch (a request's token wait): the fetch joins that trace.
   * Without it (a background refresh) the fetch starts a trace of its own.
   */
  parent?: TokenSpan | ServerSpan | undefined;
  /** The token endpoint, recorded as `url.full` without query or credentials. */
  tokenUrl?: string | undefined;
}

export interface Tracing {
  readonly enabled: boolean;
  /** The SERVER span of a request, continuing the client's `traceparent`/`tracestate`. */
  startServerSpan(req: TracedRequest): ServerSpan;
  /** A token fetch (a CLIENT span to the token endpoint). Not on the hot path. */
  startTokenFetchSpan(upstream: string, options?: TokenFetchOptions): TokenSpan;
  /** Exports the spans ended so far. */
  forceFlush(): Promise<void>;
  /** Exports what is pending and stops; later spans are dropped. */
  shutdown(): Promise<void>;
}

const NOOP_TOKEN_SPAN: TokenSpan = Object.freeze({
  addLink() {},
  end() {},
});

const NOOP_CLIENT_SPAN: ClientSpan = Object.freeze({
  traceparent: () => undefined,
  tracestate: () => undefined,
  end() {},
});

const NOOP_SERVER_SPAN: ServerSpan = Object.freeze({
  recorded: false,
  traceId: "",
  spanId: "",
  setUpstream() {},
  setPath() {},
  startClientSpan: () => NOOP_CLIENT_SPAN,
  startTokenSpan: () => NOOP_TOKEN_SPAN,
  end() {},
});

/** Tracing off: every span is the same constant, and nothing is exported. */
export const NOOP_TRACING: Tracing = Object.freeze({
  enabled: false,
  startServerSpan: () => NOOP_SERVER_SPAN,
  startTokenFetchSpan: () => NOOP_TOKEN_SPAN,
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
});

export interface TracingOptions {
  /** Where the OTEL_* variables are read; `process.env` in production. */
  env: TracingEnv;
  /** The configuration's `tracing` section. */
  config?: TracingConfig | undefined;
  logger: Logger;
  /** `service.version` on the resource. */
  serviceVersion?: string | undefined;
}

/**
 * The app's tracing: `NOOP_TRACING` when off (no OpenTelemetry module is loaded), else an SDK
 * exporting over OTLP/HTTP. Call once at start and `shutdown()` at close.
 */
export async function createTracing(options: TracingOptions): Promise<Tracing> {
  const log = options.logger.child({ component: "tracing" });
  const decision = decideTracing(options.env, options.config);
  for (const warning of decision.warnings) log.warn(warning);
  if (!decision.on) return NOOP_TRACING;
  const { createSdkTracing } = await import("./tracing-sdk.js");
  return createSdkTracing({
    env: options.env,
    logger: log,
    serviceVersion: options.serviceVersion,
  });
}

/**
 * Writes the attempt's `traceparent` (and `tracestate`, if any) into a flat `[name, value, …]`
 * header list as undici takes it: replaces the fields already there (a previous attempt's),
 * else appends them — never removing or moving one, so indexes into the list (the
 * Authorization slot) stay valid. A no-op when tracing is off: the client's fields then go
 * through as sent. With tracing on, the client's own fields must have been left out when the
 * list was built (the extracted context carries them on).
 */
export function writeTraceContext(headers: string[], span: ClientSpan): void {
  const traceparent = span.traceparent();
  if (traceparent === undefined) return;
  const tracestate = span.tracestate();
  let parentAt = -1;
  let stateAt = -1;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (name.length === 11 && name.toLowerCase() === "traceparent") parentAt = i + 1;
    else if (name.length === 10 && name.toLowerCase() === "tracestate") stateAt = i + 1;
  }
  if (parentAt < 0) headers.push("traceparent", traceparent);
  else headers[parentAt] = traceparent;
  if (tracestate === undefined) return;
  if (stateAt < 0) headers.push("tracestate", tracestate);
  else headers[stateAt] = tracestate;
}
