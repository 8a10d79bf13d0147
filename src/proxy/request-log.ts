/**
 * What every finished request leaves behind: the metrics and one JSON log line at info. The line
 * is built from an allow-list (no headers, no query string, never a token); the cause of an
 * error is reduced to its codes and message, which are ours or undici's and secret-free.
 * This runs once per request, so label objects are built once per (upstream, method, status
 * class) and the line goes through the access logger (no redaction pass, cached timestamp).
 */
import type { Logger } from "../observability/logger.js";
import { type Metrics, methodLabel, statusClass } from "../observability/metrics.js";
import { deriveAccessLogger } from "./access-logger.js";
import { describeCause } from "./proxy-errors.js";

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
}

/** Long paths are cut in the log; the request itself is limited by maxUrlLength. */
const MAX_LOGGED_PATH = 512;

type RequestLabels = { upstream: string; method: string; status_class: string };

/** Label objects, built once and reused: prom-client only reads them. */
function createLabelCache() {
  // upstream → method label → status class index (0 "other", 1–5 for 1xx–5xx). Both keys are
  // bounded: upstream names come from config, methods are folded by methodLabel.
  const byUpstream = new Map<string, Map<string, (RequestLabels | undefined)[]>>();
  const upstreamOnly = new Map<string, { upstream: string }>();
  return {
    request(upstream: string, method: string, status: number): RequestLabels {
      let byMethod = byUpstream.get(upstream);
      if (!byMethod) {
        byMethod = new Map();
        byUpstream.set(upstream, byMethod);
      }
      const methodName = methodLabel(method);
      let byClass = byMethod.get(methodName);
      if (!byClass) {
        byClass = [];
        byMethod.set(methodName, byClass);
      }
      const index = status >= 100 && status < 600 ? Math.floor(status / 100) : 0;
      let labels = byClass[index];
      if (!labels) {
        labels = { upstream, method: methodName, status_class: statusClass(status) };
        byClass[index] = labels;
      }
      return labels;
    },
    upstream(upstream: string): { upstream: string } {
      let labels = upstreamOnly.get(upstream);
      if (!labels) {
        labels = { upstream };
        upstreamOnly.set(upstream, labels);
      }
      return labels;
    },
  };
}

/** Counts a routed request in flight (paired with the decrement in the recorder). */
export type InFlightCounter = (upstream: string) => void;

export interface RequestRecorder {
  (record: RequestRecord): void;
  /** Counts a request as in flight for `upstream` once it is routed. */
  markInFlight: InFlightCounter;
}

/**
 * @param accessLogger where the access line goes; default: derived from `logger` (same level
 *   and destination, see access-logger.ts).
 */
export function createRequestRecorder(
  metrics: Metrics,
  logger: Logger,
  accessLogger: Logger = deriveAccessLogger(logger),
): RequestRecorder {
  const labelsOf = createLabelCache();
  const recordRequest = ((record: RequestRecord): void => {
    const durationMs = performance.now() - record.startMs;
    const labels = labelsOf.request(record.upstream, record.method, record.status);
    metrics.requestsTotal.inc(labels);
    metrics.requestDurationSeconds.observe(labels, durationMs / 1000);
    if (record.routed) metrics.requestsInFlight.dec(labelsOf.upstream(record.upstream));
    if (record.replayed) metrics.replaysTotal.inc(labelsOf.upstream(record.upstream));
    if (record.errorCode && record.errorCode !== "client_closed") {
      metrics.errorsTotal.inc({ upstream: record.upstream, code: record.errorCode });
    }
    if (!accessLogger.isLevelEnabled("info")) return;
    const { pathname } = record;
    accessLogger.info(
      {
        upstream: record.upstream,
        method: record.method,
        path:
          pathname.length > MAX_LOGGED_PATH ? `${pathname.slice(0, MAX_LOGGED_PATH)}…` : pathname,
        status: record.status,
        durationMs: Math.round(durationMs * 1000) / 1000,
        bytesIn: record.bytesIn,
        bytesOut: record.bytesOut,
        replayed: record.replayed,
        errorCode: record.errorCode,
        cause: describeCause(record.cause),
      },
      "request",
    );
  }) as RequestRecorder;
  recordRequest.markInFlight = (upstream) =>
    metrics.requestsInFlight.inc(labelsOf.upstream(upstream));
  return recordRequest;
}
