/**
 * What every finished request leaves behind: the metrics and one JSON log line at info. The line
 * is built from an allow-list (no headers, no query string, never a token); the cause of an
 * error is reduced to its codes and message, which are ours or undici's and secret-free.
 * This runs once per request: metrics go through request-metrics.ts, and the line through the
 * access logger (no redaction pass, cached timestamp; see access-logger.ts).
 */
import type { Metrics } from "../observability/metrics.js";
import type { AccessLog } from "./access-log.js";
import { describeCause } from "./proxy-errors.js";
import { createRequestMetrics } from "./request-metrics.js";

export interface RequestRecord {
  /** Upstream name, or "none" when refused before routing. */
  upstream: string;
  /** True once the request was routed (and counted in flight). */
  routed: boolean;
  method: string;
  /** Path without the query string. */
  pathname: string;
  status: number;
  /** `performance.now()` when the request arrived. */
  startMs: number;
  bytesIn: number;
  bytesOut: number;
  replayed: boolean;
  errorCode: string | undefined;
  cause: unknown;
  /** `user:…`, `sa:…` or `addr:…` when an `allow` list identified the caller. */
  caller?: string | undefined;
  /** "connect" for a request that came through a terminated CONNECT (intercept-entry.ts). */
  via?: "connect" | undefined;
  /** Hex ids of the request's SERVER span; "" (or absent) when tracing is off. */
  traceId?: string | undefined;
  spanId?: string | undefined;
  /** Time the pacing gate held the request (ms). */
  waitMs?: number | undefined;
  /** Times the request was sent upstream (retries and replays included). */
  attempts?: number | undefined;
}

/** Long paths are cut in the log; the request itself is limited by maxUrlLength. */
const MAX_LOGGED_PATH = 512;

export interface RequestRecorder {
  (record: RequestRecord): void;
  /** Counts a request as in flight for `upstream` once it is routed. */
  markInFlight(upstream: string): void;
}

export function createRequestRecorder(metrics: Metrics, accessLog: AccessLog): RequestRecorder {
  const requestMetrics = createRequestMetrics(metrics);
  const recordRequest = ((record: RequestRecord): void => {
    const nowMs = performance.now();
    const durationMs = nowMs - record.startMs;
    requestMetrics.finished(record, durationMs, nowMs);
    if (!accessLog.enabled()) return;
    const { pathname } = record;
    accessLog.write({
      upstream: record.upstream,
      method: record.method,
      path: pathname.length > MAX_LOGGED_PATH ? `${pathname.slice(0, MAX_LOGGED_PATH)}…` : pathname,
      status: record.status,
      durationMs: Math.round(durationMs * 1000) / 1000,
      bytesIn: record.bytesIn,
      bytesOut: record.bytesOut,
      replayed: record.replayed,
      errorCode: record.errorCode,
      cause: describeCause(record.cause),
      caller: record.caller,
      via: record.via,
      waitMs: record.waitMs ? Math.round(record.waitMs) : undefined,
      attempts: record.attempts && record.attempts > 1 ? record.attempts : undefined,
      trace_id: record.traceId || undefined,
      span_id: record.spanId || undefined,
    });
  }) as RequestRecorder;
  recordRequest.markInFlight = (upstream) => requestMetrics.started(upstream);
  return recordRequest;
}
