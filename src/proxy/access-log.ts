/**
 * The per-request access line: one JSON record at info, from a fixed allow-list of fields that
 * never holds a header, a query string or a token. It is written on every request, so:
 * - no redaction pass: the base logger's paths can't match these fields, yet pino runs its
 *   wildcard redactors on every field of every line (~5× the cost of the rest of the record).
 *   The line goes through a child without redaction (pino: `redact: []` drops the parent's);
 * - the ISO timestamp is computed at most once per ms (when the parent uses pino's `isoTime`);
 * - the line is serialised by a template built at start, not by pino's generic per-field loop —
 *   but only after the template rendered sample records byte-identically to pino itself, so any
 *   change to the logger's format (fields, formatters, hooks) falls back to pino;
 * - optionally, lines are batched: a write(2) per request cost ~15% of a small GET's CPU.
 *   Batches reach the parent's destination up to `flushMs` later (nginx's `access_log … buffer=
 *   flush=`); `flush()` writes what is pending (the proxy calls it when it closes).
 * pino.symbols is pino's published seam for integrations ("logger state adjusted, methods
 * overridden"); it is used for the time function and the destination of our own child only.
 */
import { type Logger, pino } from "pino";

/** The access line's fields, in the order they are written. */
export interface AccessLine {
  upstream: string;
  method: string;
  path: string;
  status: number;
  durationMs: number;
  bytesIn: number;
  bytesOut: number;
  replayed: boolean;
  errorCode: string | undefined;
  cause: object | undefined;
  /** Who asked, when an `allow` list identified the caller; never a credential. */
  caller?: string | undefined;
  /** "connect" when the request came through a terminated CONNECT (issue 34). */
  via?: "connect" | undefined;
  /** Whole ms the pacing gate held the request, when it did. */
  waitMs?: number | undefined;
  /** Times sent upstream, when more than once (retries, replays). */
  attempts?: number | undefined;
  /** The request's trace and SERVER span, when tracing is on. */
  trace_id?: string | undefined;
  span_id?: string | undefined;
}

export interface AccessLog {
  /** True when the line would be written (info enabled; the level may change at runtime). */
  enabled(): boolean;
  write(line: AccessLine): void;
  /** Writes batched lines now (no-op without batching). */
  flush(): void;
  /** False when the logger's format made us fall back to pino's own serialiser. */
  readonly templated: boolean;
}

export interface BatchOptions {
  /** Write once this many characters are pending. Default 16384. */
  maxChars?: number;
  /** Longest a line waits. Default 100 ms. */
  flushMs?: number;
}

export interface AccessLogOptions {
  /**
   * Batch lines before they reach the base logger's destination. Only for destinations that
   * take several lines per write (stdout, files, pipes); never for one that parses one record
   * per write.
   */
  batch?: BatchOptions | undefined;
}

/** What pino needs of a destination. */
interface LineSink {
  write(chunk: string): unknown;
}

const MESSAGE = "request";

/** `,"time":"<ISO>"` as pino's `isoTime` writes it, rebuilt only when the millisecond changes. */
export function createCachedIsoTime(now: () => number = Date.now): () => string {
  let lastMs = Number.NaN;
  let last = "";
  return () => {
    const ms = now();
    if (ms !== lastMs) {
      lastMs = ms;
      last = `,"time":"${new Date(ms).toISOString()}"`;
    }
    return last;
  };
}

/**
 * Joins lines into one write per `maxChars` or per `flushMs`, whichever comes first. pino writes
 * each record in one call, so a batch is whole lines.
 */
export function createLineBatcher(
  target: LineSink,
  options: BatchOptions = {},
): LineSink & { flush(done?: () => void): void } {
  const maxChars = options.maxChars ?? 16_384;
  const flushMs = options.flushMs ?? 100;
  let pending = "";
  let timer: NodeJS.Timeout | undefined;
  const writePending = () => {
    if (timer) {
      clearTimeout(timer);
      timer = undefined;
    }
    if (pending === "") return;
    const chunk = pending;
    pending = "";
    target.write(chunk);
  };
  return {
    write(line) {
      pending += line;
      if (pending.length >= maxChars) {
        writePending();
      } else if (!timer) {
        // One timer per batch, not per line; it never keeps the process alive.
        timer = setTimeout(writePending, flushMs);
        timer.unref();
      }
      return true;
    },
    // pino's `logger.flush(cb)` contract: cb after the write.
    flush(done) {
      writePending();
      done?.();
    },
  };
}

/** A JSON number as pino writes it (non-finite → null). */
function jsonNumber(value: number): string {
  return Number.isFinite(value) ? String(value) : "null";
}

/** The fields part of the line: `,"upstream":…` up to the last field. */
function renderFields(line: AccessLine): string {
  let out =
    `,"upstream":${JSON.stringify(line.upstream)},"method":${JSON.stringify(line.method)}` +
    `,"path":${JSON.stringify(line.path)},"status":${jsonNumber(line.status)}` +
    `,"durationMs":${jsonNumber(line.durationMs)},"bytesIn":${jsonNumber(line.bytesIn)}` +
    `,"bytesOut":${jsonNumber(line.bytesOut)},"replayed":${line.replayed}`;
  if (line.errorCode !== undefined) out += `,"errorCode":${JSON.stringify(line.errorCode)}`;
  if (line.cause !== undefined) out += `,"cause":${JSON.stringify(line.cause)}`;
  if (line.caller !== undefined) out += `,"caller":${JSON.stringify(line.caller)}`;
  if (line.via !== undefined) out += `,"via":${JSON.stringify(line.via)}`;
  if (line.waitMs !== undefined) out += `,"waitMs":${jsonNumber(line.waitMs)}`;
  if (line.attempts !== undefined) out += `,"attempts":${jsonNumber(line.attempts)}`;
  if (line.trace_id !== undefined) out += `,"trace_id":${JSON.stringify(line.trace_id)}`;
  if (line.span_id !== undefined) out += `,"span_id":${JSON.stringify(line.span_id)}`;
  return out;
}

/** Records the template must render exactly as pino does (escapes, optional fields, odd numbers). */
const SAMPLES: AccessLine[] = [
  {
    upstream: "u",
    method: "GET",
    path: "/a",
    status: 200,
    durationMs: 1.25,
    bytesIn: 0,
    bytesOut: 10,
    replayed: false,
    errorCode: undefined,
    cause: undefined,
  },
  {
    upstream: "up-2",
    method: "OTHER",
    path: '/q"\\\u0001\u2028é…',
    status: 502,
    durationMs: 0.001,
    bytesIn: 65_536,
    bytesOut: 0,
    replayed: true,
    errorCode: "upstream_reset",
    cause: { codes: ["ECONNRESET"], message: 'socket "hang up"' },
    caller: "sa:payments/billing-client",
    via: "connect",
    waitMs: 150,
    attempts: 2,
    trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
    span_id: "00f067aa0ba902b7",
  },
];

/**
 * The template `line → text` for `child`, or undefined if it can't reproduce pino's output for
 * every sample. pino writes level + time() + bindings + fields + msg + end; rendering the samples
 * with a marker for the time gives the parts around the fields.
 */
function compileTemplate(
  base: Logger,
  time: () => string,
): ((line: AccessLine) => string) | undefined {
  const { timeSym, streamSym } = pino.symbols;
  const probe = base.child({}, { redact: [] });
  const probeState = probe as unknown as Record<symbol, unknown>;
  const marker = "\u0000time\u0000";
  let captured = "";
  probeState[timeSym] = () => marker;
  probeState[streamSym] = {
    write(chunk: string) {
      captured += chunk;
      return true;
    },
  };
  if (!probe.isLevelEnabled("info")) probe.level = "info";
  const render = (line: AccessLine) => {
    captured = "";
    probe.info(line, MESSAGE);
    return captured;
  };
  const first = render(SAMPLES[0]!);
  const timeAt = first.indexOf(marker);
  const fields = renderFields(SAMPLES[0]!);
  const fieldsAt = first.indexOf(fields, timeAt + marker.length);
  if (timeAt < 0 || fieldsAt < 0) return undefined;
  const head = first.slice(0, timeAt);
  const bindings = first.slice(timeAt + marker.length, fieldsAt);
  const tail = first.slice(fieldsAt + fields.length);
  const template = (line: AccessLine) => head + time() + bindings + renderFields(line) + tail;
  const check = (line: AccessLine) =>
    head + marker + bindings + renderFields(line) + tail === render(line);
  return SAMPLES.every(check) ? template : undefined;
}

/**
 * The access log of a proxy listener, derived from the app's logger: same level, destination,
 * base fields and formatters; output byte-identical to `child.info(line, "request")`.
 */
export function createAccessLog(base: Logger, options: AccessLogOptions = {}): AccessLog {
  const { timeSym, streamSym, needsMetadataGsym, mixinSym } = pino.symbols;
  const child = base.child({}, { redact: [] });
  const state = child as unknown as Record<symbol, unknown>;
  if (state[timeSym] === pino.stdTimeFunctions.isoTime) {
    state[timeSym] = createCachedIsoTime();
  }
  const time = state[timeSym] as () => string;
  const stream = state[streamSym] as LineSink & Record<symbol, unknown>;
  // A multistream reads per-record metadata off the stream object: only pino may write to it.
  const plainStream = stream[needsMetadataGsym] !== true;
  // A mixin may add per-call fields the template would freeze.
  const template = plainStream && !state[mixinSym] ? compileTemplate(base, time) : undefined;
  let sink: LineSink = stream;
  let flush = () => {};
  if (options.batch && plainStream) {
    const batcher = createLineBatcher(stream, options.batch);
    state[streamSym] = batcher;
    sink = batcher;
    flush = () => batcher.flush();
  }
  return {
    enabled: () => child.isLevelEnabled("info"),
    write: template
      ? (line) => {
          sink.write(template(line));
        }
      : (line) => child.info(line, MESSAGE),
    flush,
    templated: template !== undefined,
  };
}
