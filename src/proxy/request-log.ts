/**
 * What every finished request leaves behind: the metrics and one JSON log line at info. The line
 * is built from an allow-list (no headers, no query string, never a token); the cause of an
 * error is reduced to its codes and message, which are ours or undici's and secret-free.
 */
import type { Logger } from "../observability/logger.js";
import { type Metrics, methodLabel, statusClass } from "../observability/metrics.js";
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

export function createRequestRecorder(metrics: Metrics, logger: Logger) {
  return function recordRequest(record: RequestRecord): void {
    const durationMs = performance.now() - record.startMs;
    const labels = {
      upstream: record.upstream,
      method: methodLabel(record.method),
      status_class: statusClass(record.status),
    };
    metrics.requestsTotal.inc(labels);
    metrics.requestDurationSeconds.observe(labels, durationMs / 1000);
    if (record.routed) metrics.requestsInFlight.dec({ upstream: record.upstream });
    if (record.replayed) metrics.replaysTotal.inc({ upstream: record.upstream });
    if (record.errorCode && record.errorCode !== "client_closed") {
      metrics.errorsTotal.inc({ upstream: record.upstream, code: record.errorCode });
    }
    if (!logger.isLevelEnabled("info")) return;
    const { pathname } = record;
    logger.info(
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
  };
}
