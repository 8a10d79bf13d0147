/**
 * Per-request metric updates at a fraction of prom-client's per-call price. Each prom-client
 * update validates and hashes its label object; four per request were ~5% of a small GET's CPU,
 * the histogram's observe most of it. Here a request costs plain number increments on entries
 * resolved once per (upstream, method, status class): the counters' pending counts, and the
 * duration histogram's series (observability/series-histogram.ts, a few number updates where a
 * prom-client observe cost 0.3 µs even batched). The counts are brought up to date before they
 * can be seen: a `collect` function (prom-client calls it from `get()`, so for /metrics, the
 * status page and tests alike) applies what accumulated since the last read.
 */
import { isPolicyRefusal } from "../errors.js";
import { type Metrics, methodLabel, statusClass } from "../observability/metrics.js";
import type { HistogramSeries } from "../observability/series-histogram.js";

type RequestLabels = { upstream: string; method: string; status_class: string };

/** One (upstream, method, status class) series. */
interface RequestSeries {
  labels: RequestLabels;
  /** Requests finished since the last collect. */
  pending: number;
  /** The duration histogram's series for these labels. */
  duration: HistogramSeries;
}

/** One upstream's in-flight series. */
interface InFlightSeries {
  labels: { upstream: string };
  /** Started minus finished since the last collect. */
  delta: number;
}

export interface FinishedRequest {
  upstream: string;
  /** True if `started` was called for this request. */
  routed: boolean;
  method: string;
  status: number;
  replayed: boolean;
  errorCode: string | undefined;
}

export interface RequestMetrics {
  /** A request was routed to `upstream`: it is in flight until `finished`. */
  started(upstream: string): void;
  /** `nowMs`: `performance.now()` at the end, if the caller has it (dates the 15-minute rates). */
  finished(request: FinishedRequest, durationMs: number, nowMs?: number): void;
}

/** What prom-client calls before reading a metric; typed here because its classes omit it. */
interface Collectable {
  collect?: (() => void | Promise<void>) | undefined;
}

/**
 * Runs `flush` before `metric` is read, keeping any collect function already set (several proxy
 * listeners share one Metrics). prom-client documents `collect` as a metric configuration field
 * and reads it from the instance at every `get()`.
 */
function collectBefore(metric: object, flush: () => void): void {
  const target = metric as Collectable;
  const previous = target.collect;
  target.collect = function collect(this: unknown) {
    flush();
    return previous?.call(this);
  };
}

export function createRequestMetrics(metrics: Metrics): RequestMetrics {
  // upstream → method label → status class index (0 "other", 1–5 for 1xx–5xx). Both keys are
  // bounded: upstream names come from config, methods are folded by methodLabel.
  const series = new Map<string, Map<string, (RequestSeries | undefined)[]>>();
  const allSeries: RequestSeries[] = [];
  const inFlight = new Map<string, InFlightSeries>();
  const rates = metrics.requestRates;

  function seriesFor(upstream: string, method: string, status: number): RequestSeries {
    let byMethod = series.get(upstream);
    if (!byMethod) {
      byMethod = new Map();
      series.set(upstream, byMethod);
    }
    const methodName = methodLabel(method);
    let byClass = byMethod.get(methodName);
    if (!byClass) {
      byClass = [];
      byMethod.set(methodName, byClass);
    }
    const index = status >= 100 && status < 600 ? Math.floor(status / 100) : 0;
    let entry = byClass[index];
    if (!entry) {
      const labels = { upstream, method: methodName, status_class: statusClass(status) };
      entry = { labels, pending: 0, duration: metrics.requestDurationSeconds.series(labels) };
      byClass[index] = entry;
      allSeries.push(entry);
    }
    return entry;
  }

  function inFlightFor(upstream: string): InFlightSeries {
    let entry = inFlight.get(upstream);
    if (!entry) {
      entry = { labels: { upstream }, delta: 0 };
      inFlight.set(upstream, entry);
      // The series exists (at 0) from the first routed request on, as with inc/dec per request.
      metrics.requestsInFlight.inc(entry.labels, 0);
    }
    return entry;
  }

  collectBefore(metrics.requestsTotal, () => {
    for (const entry of allSeries) {
      if (entry.pending === 0) continue;
      metrics.requestsTotal.inc(entry.labels, entry.pending);
      entry.pending = 0;
    }
  });
  collectBefore(metrics.requestsInFlight, () => {
    for (const entry of inFlight.values()) {
      if (entry.delta === 0) continue;
      metrics.requestsInFlight.inc(entry.labels, entry.delta);
      entry.delta = 0;
    }
  });

  return {
    started(upstream) {
      inFlightFor(upstream).delta++;
    },
    finished(request, durationMs, nowMs = performance.now()) {
      // A policy refusal (allow, rateLimit) is the gateway working, not an error of the upstream's.
      const error =
        request.status >= 500 ||
        (request.errorCode !== undefined &&
          request.errorCode !== "client_closed" &&
          !isPolicyRefusal(request.errorCode));
      rates.record(request.upstream, error, nowMs);
      const entry = seriesFor(request.upstream, request.method, request.status);
      entry.pending++;
      entry.duration.observe(durationMs / 1000);
      if (request.routed) inFlightFor(request.upstream).delta--;
      if (request.replayed) metrics.replaysTotal.inc({ upstream: request.upstream });
      if (request.errorCode && request.errorCode !== "client_closed") {
        metrics.errorsTotal.inc({ upstream: request.upstream, code: request.errorCode });
      }
    },
  };
}
