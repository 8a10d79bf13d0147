/**
 * Small fakes for the unit tests of the request pipeline's stages and the exchange's layers
 * (test/proxy/pipeline/, test/proxy/exchange/). Real where it is cheap — a real ProxiedRequest,
 * Node's own IncomingMessage/ServerResponse, a real Route and Exchange — and recorded where the
 * real thing is heavy: the socket under the response (its bytes are kept and parsed), the
 * request context (finishes and access records kept), the flow (who passed), the dispatcher
 * (each attempt kept; the test answers it through undici's handler API), the relay (what came
 * out of the layers), the tracer and the pacer.
 */
import { IncomingMessage, ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import { Duplex, type Readable } from "node:stream";
import { Dispatcher } from "undici";
import { vi } from "vitest";
import type { UpstreamConfig } from "../../../src/config/proxy-config.js";
import type { ProxyErrorCode } from "../../../src/errors.js";
import { createLogger, type Logger } from "../../../src/observability/logger.js";
import { createMetrics } from "../../../src/observability/metrics.js";
import type {
  ClientSpan,
  ServerSpan,
  TokenSpan,
  TracedRequest,
  Tracing,
} from "../../../src/observability/tracing.js";
import type { Admission, Pacer, PacerState } from "../../../src/pacing/limiter.js";
import type { PauseReason } from "../../../src/pacing/pause.js";
import { createUpstreamPacing, type UpstreamPacing } from "../../../src/pacing/upstream-pacing.js";
import { Exchange, type ExchangeLayers } from "../../../src/proxy/exchange/exchange.js";
import type { AttemptHandler } from "../../../src/proxy/exchange/layer.js";
import type { Flow } from "../../../src/proxy/pipeline/pipeline.js";
import {
  type FailExtra,
  ProxiedRequest,
  type RequestContext,
  type RequestKind,
} from "../../../src/proxy/proxied-request.js";
import type { RequestRecord, RequestRecorder } from "../../../src/proxy/request-log.js";
import { Route, type RouteSources } from "../../../src/proxy/routing/route.js";
import type { AccessToken, TokenProvider } from "../../../src/token/token-provider.js";
import { parseResponses, type RawResponse } from "../../helpers/raw-http.js";
import { createStubTokens } from "../stub-tokens.js";

// ---------------------------------------------------------------------------------------------
// The client side: a request and a response over a socket that keeps what was written.

/** A socket that keeps every byte written to it and reads nothing. */
export class CapturingSocket extends Duplex {
  private readonly chunks: Buffer[] = [];

  constructor(readonly remoteAddress = "10.0.0.9") {
    super();
  }

  override _read(): void {}

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: () => void): void {
    this.chunks.push(Buffer.from(chunk));
    callback();
  }

  /** Everything written so far, latin1. */
  text(): string {
    return Buffer.concat(this.chunks).toString("latin1");
  }
}

export interface ClientRequestOptions {
  method?: string;
  /** The request target as sent (origin-form or absolute-form). Default "/". */
  url?: string;
  /** Raw `[name, value, …]` list; default a Host header only. */
  rawHeaders?: string[];
  httpVersion?: "1.0" | "1.1";
  remoteAddress?: string;
}

/** A parsed client request and its response, as Node hands them to a 'request' listener. */
export function clientRequest(options: ClientRequestOptions = {}): {
  req: IncomingMessage;
  res: ServerResponse;
  socket: CapturingSocket;
} {
  const socket = new CapturingSocket(options.remoteAddress);
  const req = new IncomingMessage(socket as never);
  req.method = options.method ?? "GET";
  req.url = options.url ?? "/";
  const version = options.httpVersion ?? "1.1";
  req.httpVersion = version;
  req.httpVersionMajor = 1;
  req.httpVersionMinor = version === "1.1" ? 1 : 0;
  const raw = options.rawHeaders ?? ["Host", "svc.local"];
  req.rawHeaders = raw;
  const headers: Record<string, string> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    headers[name] = headers[name] === undefined ? raw[i + 1]! : `${headers[name]}, ${raw[i + 1]}`;
  }
  req.headers = headers;
  const res = new ServerResponse(req);
  res.assignSocket(socket as never);
  return { req, res, socket };
}

/** What the request context saw: finishes, access records, upstreams counted in flight. */
export class RecordingContext implements RequestContext {
  readonly records: RequestRecord[] = [];
  readonly finished: ProxiedRequest[] = [];
  readonly inFlight: string[] = [];
  /** `closingAll()`: every answer closes its connection (draining). */
  closing = false;
  readonly recordRequest: RequestRecorder;

  constructor(readonly tracing: Tracing = new RecordingTracing()) {
    const recorder = ((record: RequestRecord) => {
      this.records.push(record);
    }) as RequestRecorder;
    recorder.markInFlight = (upstream) => {
      this.inFlight.push(upstream);
    };
    this.recordRequest = recorder;
  }

  closingAll(): boolean {
    return this.closing;
  }

  onFinished(request: ProxiedRequest): void {
    this.finished.push(request);
  }

  /** Load moves as the pacing stage asks for them: "leave" and "resume". */
  readonly loadMoves: string[] = [];

  leaveLoad(request: ProxiedRequest): void {
    this.loadMoves.push("leave");
    request.admitted = false;
  }

  resumeLoad(request: ProxiedRequest): boolean {
    this.loadMoves.push("resume");
    request.admitted = true;
    return true;
  }
}

/** One `request.fail` call. */
export interface FailCall {
  code: ProxyErrorCode;
  message: string;
  extra: FailExtra | undefined;
}

/** A ProxiedRequest on a capturing socket, with what its boundary and context saw. */
export class TestRequest {
  readonly request: ProxiedRequest;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly socket: CapturingSocket;
  readonly ctx: RecordingContext;
  /** Every `fail` call, answered or not (a second one is ignored by the boundary). */
  readonly fails: FailCall[] = [];

  constructor(options: ClientRequestOptions & { kind?: RequestKind; ctx?: RecordingContext } = {}) {
    const { req, res, socket } = clientRequest(options);
    this.req = req;
    this.res = res;
    this.socket = socket;
    this.ctx = options.ctx ?? new RecordingContext();
    this.request = new ProxiedRequest(options.kind ?? "request", req, res, this.ctx);
    const fail = this.request.fail.bind(this.request);
    vi.spyOn(this.request, "fail").mockImplementation((code, message, extra, bytesOut) => {
      this.fails.push({ code, message, extra });
      fail(code, message, extra, bytesOut);
    });
  }

  /** The responses the client received so far, parsed. */
  answers(): RawResponse[] {
    return parseResponses(this.socket.text());
  }

  /** The one response the client received (throws when there is not exactly one). */
  answer(): RawResponse {
    const answers = this.answers();
    if (answers.length !== 1) {
      throw new Error(`expected one answer, got ${answers.length}: ${this.socket.text()}`);
    }
    return answers[0]!;
  }

  /** The single access record (throws unless the request finished exactly once). */
  record(): RequestRecord {
    if (this.ctx.records.length !== 1) {
      throw new Error(`expected one access record, got ${this.ctx.records.length}`);
    }
    return this.ctx.records[0]!;
  }
}

/** The error contract's JSON body. */
export function errorBody(answer: RawResponse): { code: string; message: string } {
  return (JSON.parse(answer.body) as { error: { code: string; message: string } }).error;
}

/** Records who the stage passed on. */
export class RecordingFlow implements Flow {
  readonly passed: ProxiedRequest[] = [];

  next(request: ProxiedRequest): void {
    this.passed.push(request);
  }
}

/** A pino logger whose records are kept, parsed. */
export function recordingLogger(): { logger: Logger; logs: Record<string, unknown>[] } {
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: "info",
    format: "json",
    destination: { write: (line: string) => logs.push(JSON.parse(line)) },
  });
  return { logger, logs };
}

// ---------------------------------------------------------------------------------------------
// The upstream side: a dispatcher whose attempts the test answers, and routes around it.

/** One dispatched attempt, answered by the test through undici's handler API. */
export class DispatchedAttempt {
  /** The header list as it was when dispatched (the exchange reuses the list per attempt). */
  readonly headers: string[];
  /** Why undici was asked to abort this attempt (undefined: it was not). */
  abortReason: Error | undefined;
  aborted = false;
  resumed = 0;

  constructor(
    readonly dispatcher: ScriptedDispatcher,
    readonly options: Dispatcher.DispatchOptions,
    readonly handler: Dispatcher.DispatchHandler,
  ) {
    this.headers = [...(options.headers as string[])];
  }

  /** The first value of `name` (any case) as sent. */
  header(name: string): string | undefined {
    const lower = name.toLowerCase();
    for (let i = 0; i + 1 < this.headers.length; i += 2) {
      if (this.headers[i]!.toLowerCase() === lower) return this.headers[i + 1];
    }
    return undefined;
  }

  /** The attempt ended (completed, failed or aborted): undici calls nothing more. */
  private ended = false;

  /**
   * undici got a connection for it: onConnect with an abort that behaves like undici's
   * (client-h1 `abort` → `errorRequest`): recorded, and the handler's onError called at once,
   * synchronously, unless the attempt had ended.
   */
  connect(): this {
    this.handler.onConnect!((err?: Error) => {
      this.aborted = true;
      this.abortReason = err;
      if (this.ended) return;
      this.ended = true;
      this.handler.onError!(err ?? codedError("UND_ERR_ABORTED", "Request aborted"));
    });
    return this;
  }

  /** The response head; returns what the handler answered (false: pause). */
  head(status: number, headers: Record<string, string> = {}, statusText = ""): boolean {
    const raw: Buffer[] = [];
    for (const [name, value] of Object.entries(headers))
      raw.push(Buffer.from(name), Buffer.from(value));
    return this.handler.onHeaders!(status, raw, () => this.resumed++, statusText);
  }

  data(chunk: string | Buffer): boolean {
    return this.handler.onData!(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  }

  complete(trailers: string[] | null = null): void {
    this.ended = true;
    this.handler.onComplete!(trailers);
  }

  error(err: Error): void {
    this.ended = true;
    this.handler.onError!(err);
  }

  /** connect, head, one body chunk (if any), complete. */
  respond(status: number, headers: Record<string, string> = {}, body = ""): void {
    this.connect();
    this.head(
      status,
      body === "" ? headers : { "content-length": String(body.length), ...headers },
    );
    if (body !== "") this.data(body);
    this.complete();
  }

  /** connect, then a failure before any head. */
  fail(err: Error): void {
    this.connect();
    this.error(err);
  }
}

/** A Node-style error with a `code`, as undici and the socket raise them. */
export function codedError(code: string, message = code): Error {
  return Object.assign(new Error(message), { code });
}

/** A dispatcher that sends nothing: it keeps each attempt for the test to answer. */
export class ScriptedDispatcher extends Dispatcher {
  readonly attempts: DispatchedAttempt[] = [];

  constructor(readonly label = "pooled") {
    super();
  }

  override dispatch(
    options: Dispatcher.DispatchOptions,
    handler: Dispatcher.DispatchHandler,
  ): boolean {
    this.attempts.push(new DispatchedAttempt(this, options, handler));
    return true;
  }

  /** The latest attempt (throws when there is none). */
  get last(): DispatchedAttempt {
    const attempt = this.attempts.at(-1);
    if (attempt === undefined) throw new Error(`no attempt went through ${this.label}`);
    return attempt;
  }
}

export interface TestRouteOptions {
  tokens?: TokenProvider;
  dispatcher?: Dispatcher;
  freshDispatcher?: Dispatcher;
  upgradeDispatcher?: Dispatcher;
  pacing?: UpstreamPacing;
  dropTraceContext?: boolean;
}

/** A real Route around `config`, with the given (or stub) token source and dispatchers. */
export function makeRoute(config: UpstreamConfig, options: TestRouteOptions = {}): Route {
  const tokens = options.tokens ?? createStubTokens();
  const dispatcher = options.dispatcher ?? new ScriptedDispatcher();
  const sources: RouteSources = {
    tokenFor: () => tokens,
    dispatcherFor: () => dispatcher,
    freshDispatcherFor: options.freshDispatcher && (() => options.freshDispatcher!),
    upgradeDispatcherFor: options.upgradeDispatcher && (() => options.upgradeDispatcher!),
    pacingFor: () => options.pacing,
  };
  return new Route(config, sources, { dropTraceContext: options.dropTraceContext });
}

/** A bearer token (or any AccessToken shape) for unit tests. */
export function testToken(value: string, extra: Partial<AccessToken> = {}): AccessToken {
  return {
    value,
    fingerprint: "0123abcd",
    scope: undefined,
    obtainedAtMs: 0,
    expiresAtMs: Number.MAX_SAFE_INTEGER,
    expiresAtWallMs: Number.MAX_SAFE_INTEGER,
    lifetimeMs: 600_000,
    ...extra,
  };
}

export interface RoutedRequestOptions extends ClientRequestOptions {
  kind?: RequestKind;
  ctx?: RecordingContext;
  token?: AccessToken;
  /** A Buffer (replayable), a stream (not) or null (no body). Default null. */
  body?: Buffer | Readable | null;
  /** Path and query sent upstream. Default the request's url. */
  upstreamPath?: string;
}

/**
 * A request as the stages leave it for the exchange: routed to `route`, its forwarded header
 * list built by the route (credential slots included), a token and a body in hand.
 */
export function routedRequest(route: Route, options: RoutedRequestOptions = {}): TestRequest {
  const test = new TestRequest(options);
  const { request } = test;
  request.markRouted(route);
  const built = route.headers.build(test.req.rawHeaders, {
    remoteAddress: undefined,
    authority: test.req.headers.host,
  });
  if (built.kind !== "ok") throw new Error(`headers refused: ${built.message}`);
  request.headers = built.headers;
  request.slots = built;
  request.upstreamPath = options.upstreamPath ?? test.req.url ?? "/";
  request.token = options.token ?? testToken("token-1");
  request.body = options.body ?? null;
  return test;
}

// ---------------------------------------------------------------------------------------------
// The end of the layers: what came out of them.

export type SinkEvent =
  | { type: "headers"; status: number; headers: Record<string, string>; statusText: string }
  | { type: "data"; text: string }
  | { type: "complete"; trailers: unknown }
  | { type: "error"; error: Error }
  | { type: "upgrade"; status: number };

/**
 * Stands where the relay stands (the innermost layer and the exchange's `relay` role): records
 * every callback, and ends the exchange the way the relay does — finished on complete, failed
 * on an error — so `exchange.finished` means what it means in production.
 */
export class RecordingSink implements AttemptHandler {
  readonly events: SinkEvent[] = [];
  bytesOut = 0;
  stops = 0;
  /** What onHeaders and onData answer (false: pause the upstream). */
  accept = true;
  private exchange: Exchange | undefined;

  attach(exchange: Exchange): this {
    this.exchange = exchange;
    return this;
  }

  onHeaders(
    statusCode: number,
    rawHeaders: readonly (Buffer | string)[],
    _resume: () => void,
    statusText: string,
  ): boolean {
    const headers: Record<string, string> = {};
    for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
      headers[String(rawHeaders[i]).toLowerCase()] = String(rawHeaders[i + 1]);
    }
    this.events.push({ type: "headers", status: statusCode, headers, statusText });
    return this.accept;
  }

  onData(chunk: Buffer): boolean {
    this.bytesOut += chunk.length;
    this.events.push({ type: "data", text: chunk.toString("latin1") });
    return this.accept;
  }

  onComplete(trailers: readonly (Buffer | string)[] | null): void {
    this.events.push({ type: "complete", trailers });
    const status = this.statuses().at(-1) ?? 0;
    this.exchange?.finish({ status, errorCode: undefined, cause: undefined });
  }

  onError(err: Error): void {
    this.events.push({ type: "error", error: err });
    this.exchange?.fail({ code: "upstream_error", message: "failed", cause: err });
  }

  onUpgrade(statusCode: number, _rawHeaders: unknown, socket: Duplex): void {
    this.events.push({ type: "upgrade", status: statusCode });
    socket.destroy();
  }

  stop(): void {
    this.stops++;
  }

  /** The statuses of the heads that came out, in order. */
  statuses(): number[] {
    return this.events.flatMap((e) => (e.type === "headers" ? [e.status] : []));
  }

  /** The body text that came out. */
  body(): string {
    return this.events.map((e) => (e.type === "data" ? e.text : "")).join("");
  }

  types(): SinkEvent["type"][] {
    return this.events.map((e) => e.type);
  }
}

// ---------------------------------------------------------------------------------------------
// Tracing that records its spans.

export class RecordingTokenSpan implements TokenSpan {
  readonly ends: (string | undefined)[] = [];
  readonly links: TokenSpan[] = [];

  constructor(readonly upstream: string) {}

  addLink(other: TokenSpan): void {
    this.links.push(other);
  }

  end(errorCode?: string): void {
    this.ends.push(errorCode);
  }
}

export class RecordingClientSpan implements ClientSpan {
  readonly ends: {
    status: number | undefined;
    errorCode: string | undefined;
    protocolVersion: string | undefined;
  }[] = [];

  constructor(
    readonly index: number,
    readonly method: string,
    readonly origin: string,
    readonly path: string,
    readonly upstream: string,
    readonly resendCount: number | undefined,
  ) {}

  traceparent(): string {
    return `00-${"a".repeat(32)}-${String(this.index).padStart(16, "0")}-01`;
  }

  tracestate(): string | undefined {
    return undefined;
  }

  end(status?: number, errorCode?: string, protocolVersion?: string): void {
    this.ends.push({ status, errorCode, protocolVersion });
  }
}

export class RecordingServerSpan implements ServerSpan {
  /** Recorded unless a test says not (a request the sampler left out). */
  recorded = true;
  readonly traceId = "a".repeat(32);
  readonly spanId = "b".repeat(16);
  upstream: string | undefined;
  path: string | undefined;
  readonly ends: { status: number; errorCode: string | undefined }[] = [];
  readonly clients: RecordingClientSpan[] = [];
  readonly tokenSpans: RecordingTokenSpan[] = [];

  setUpstream(name: string): void {
    this.upstream = name;
  }

  setPath(pathname: string): void {
    this.path = pathname;
  }

  startClientSpan(
    method: string,
    origin: string,
    path: string,
    upstream: string,
    resendCount?: number,
  ): RecordingClientSpan {
    const span = new RecordingClientSpan(
      this.clients.length + 1,
      method,
      origin,
      path,
      upstream,
      resendCount,
    );
    this.clients.push(span);
    return span;
  }

  startTokenSpan(upstream: string): RecordingTokenSpan {
    const span = new RecordingTokenSpan(upstream);
    this.tokenSpans.push(span);
    return span;
  }

  end(status: number, errorCode?: string): void {
    this.ends.push({ status, errorCode });
  }
}

export class RecordingTracing implements Tracing {
  readonly enabled = true;
  readonly servers: RecordingServerSpan[] = [];

  /** `recorded`: false plays a sampler that leaves every request out. */
  constructor(private readonly recorded = true) {}

  startServerSpan(_req: TracedRequest): RecordingServerSpan {
    const span = new RecordingServerSpan();
    span.recorded = this.recorded;
    this.servers.push(span);
    return span;
  }

  startTokenFetchSpan(upstream: string): TokenSpan {
    return new RecordingTokenSpan(upstream);
  }

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

// ---------------------------------------------------------------------------------------------
// Pacing: a pacer the test answers, inside the product's own UpstreamPacing.

/** A turn at once, nothing waited. */
export const FREE_TURN: Extract<Admission, { ok: true }> = Object.freeze({
  ok: true,
  waitedMs: 0,
  remaining: 9,
  resetSeconds: 1,
});

export class ScriptedPacer implements Pacer {
  readonly acquisitions: {
    key: string;
    waitMs: number | undefined;
    signal: AbortSignal | undefined;
  }[] = [];
  readonly pauses: { untilMs: number; reason: PauseReason }[] = [];
  /** How each acquire is answered; default a free turn at once. */
  answer: (key: string, waitMs: number | undefined) => Admission | Promise<Admission> = () =>
    FREE_TURN;

  acquire(
    key: string,
    signal?: AbortSignal | (() => AbortSignal | undefined),
    waitMs?: number,
  ): Admission | Promise<Admission> {
    const answer = this.answer(key, waitMs);
    // The signal is made only for a request that has to wait, as the real pacers do.
    const resolved =
      answer instanceof Promise && typeof signal === "function" ? signal() : undefined;
    this.acquisitions.push({ key, waitMs, signal: resolved });
    return answer;
  }

  pause(untilMs: number, reason: PauseReason): void {
    this.pauses.push({ untilMs, reason });
  }

  state(): PacerState {
    return {
      scope: "local",
      queued: 0,
      keys: 0,
      nextTurnInMs: 0,
      pausedForMs: 0,
      pauseReason: undefined,
      degraded: false,
    };
  }

  close(): void {}
}

/** A clock pinned at this monotonic ms: a pause's end reads as `PACER_NOW_MS + ms`. */
export const PACER_NOW_MS = 1_000_000;

/** The product's UpstreamPacing for `config` (its rateLimit and retry) around `pacer`. */
export function makePacing(
  config: UpstreamConfig,
  pacer: Pacer = new ScriptedPacer(),
): UpstreamPacing {
  return createUpstreamPacing({
    upstream: config.name,
    pacer,
    rateLimit: config.rateLimit,
    maxPauseMs: config.pause?.maxPauseMs ?? 60_000,
    retry: config.retry,
    metrics: createMetrics({ collectProcessMetrics: false }),
    now: () => PACER_NOW_MS,
  });
}

// ---------------------------------------------------------------------------------------------

/** A promise with its settle functions outside. */
export function deferred<T>(): {
  promise: Promise<T>;
  resolve: (value: T) => void;
  reject: (err: unknown) => void;
} {
  let resolve!: (value: T) => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets pending promise callbacks run. */
export async function flushPromises(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

// ---------------------------------------------------------------------------------------------
// An exchange with the layer under test between it and a recording sink.

export interface ExchangeRigOptions extends TestRouteOptions {
  request?: RoutedRequestOptions;
  /** The `Upgrade` value (an upgrade's exchange); undefined for a plain request. */
  upgrade?: string;
}

/**
 * A real Exchange for `config`: its route's dispatchers are scripted (pooled, fresh, upgrade),
 * its request routed with a token and the given body, and a RecordingSink in the relay's place.
 * `start` sends the first attempt with the given layers (default: the sink alone).
 */
export function exchangeRig(config: UpstreamConfig, options: ExchangeRigOptions = {}) {
  const dispatcher = new ScriptedDispatcher("pooled");
  const fresh = new ScriptedDispatcher("fresh");
  const upgradeDispatcher = new ScriptedDispatcher("upgrade");
  const route = makeRoute(config, {
    dispatcher,
    freshDispatcher: fresh,
    upgradeDispatcher,
    ...options,
  });
  const test = routedRequest(route, options.request);
  const exchange = new Exchange(test.request, options.upgrade);
  const sink = new RecordingSink().attach(exchange);
  return {
    route,
    test,
    exchange,
    sink,
    dispatcher,
    fresh,
    upgradeDispatcher,
    /** Attempts over every dispatcher, in order. */
    attempts(): DispatchedAttempt[] {
      return [...dispatcher.attempts, ...fresh.attempts, ...upgradeDispatcher.attempts];
    },
    start(layers: Partial<ExchangeLayers> = {}): void {
      exchange.start({
        head: sink,
        span: undefined,
        pacing: undefined,
        retry: undefined,
        relay: sink,
        recoveries: undefined,
        ...layers,
      });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// A raw client for the tests that run on a real connection (body stage, relay).

export interface RawClient {
  readonly socket: Socket;
  /** Everything received so far, latin1. */
  text(): string;
  /** The server closed (or cut) the connection. */
  closed(): boolean;
}

/** Opens a raw connection to 127.0.0.1:`port`; the caller destroys `socket` when done. */
export function openRawClient(port: number): RawClient {
  const socket = connect(port, "127.0.0.1");
  const received: Buffer[] = [];
  let closed = false;
  socket.on("data", (chunk: Buffer) => received.push(chunk));
  socket.on("close", () => {
    closed = true;
  });
  // A cut connection is what some tests wait for.
  socket.on("error", () => {});
  return {
    socket,
    text: () => Buffer.concat(received).toString("latin1"),
    closed: () => closed,
  };
}
