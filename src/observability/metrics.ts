/**
 * Prometheus instruments, created once per app on their own registry (never prom-client's global
 * one, so several apps can live in one process, e.g. in tests). Labels come only from config
 * (upstream name), the method, status class and error codes — never raw paths or hosts.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { MAX_TIMER_MS } from "../base/clock.js";
import { registerEventLoopDelay } from "./event-loop-delay.js";
import { createRequestRates, type RequestRates } from "./request-rates.js";
import { SeriesHistogram } from "./series-histogram.js";

export interface Metrics {
  registry: Registry;
  requestsTotal: Counter<"upstream" | "method" | "status_class">;
  /** Observed per request through its series (request-metrics.ts): series-histogram.ts. */
  requestDurationSeconds: SeriesHistogram<"upstream" | "method" | "status_class">;
  requestsInFlight: Gauge<"upstream">;
  errorsTotal: Counter<"upstream" | "code">;
  replaysTotal: Counter<"upstream">;
  /** Token endpoint requests only: a token read from the shared cache is not one. */
  tokenFetchesTotal: Counter<"upstream" | "outcome">;
  /** Tokens taken from the shared Redis cache (`tokenCache.redis`) instead of a request. */
  tokenSharedCacheHitsTotal: Counter<"upstream">;
  tokenFetchDurationSeconds: Histogram<"upstream">;
  tokenExpiryTimestampSeconds: Gauge<"upstream">;
  redisUp: Gauge;
  configReloadsTotal: Counter<"outcome">;
  upgradesOpen: Gauge;
  callerDeniedTotal: Counter<"upstream" | "reason">;
  /** bcrypt password checks started (issue 30: a burst from one address starts at most 10). */
  callerPasswordChecksTotal: Counter;
  /** Password checks waiting for a slot, read from the check queue at scrape. */
  callerPasswordChecksWaiting: Gauge;
  /** Where `callerPasswordChecksWaiting` reads from. */
  watchPasswordChecks(source: () => number): void;
  /** Requests the pacing gate refused, and the upstream's own "slow down" answers (issue 26). */
  rateLimitedTotal: Counter<"upstream" | "reason">;
  /** Requests waiting for their turn, read from the pacers at scrape (see watchRateLimitQueues). */
  rateLimitQueueDepth: Gauge<"upstream">;
  /** How long requests that had to wait for their turn waited. */
  rateLimitWaitSeconds: Histogram<"upstream">;
  /** Requests sent again after a failure (`upstreams[].retry`), by reason. */
  retriesTotal: Counter<"upstream" | "reason">;
  /**
   * TLS handshakes inside a terminated CONNECT that failed, by upstream and reason
   * (intercept/handshake-failure.ts: `untrusted_ca`, `timeout`, `closed`, `other`).
   */
  interceptHandshakeFailuresTotal: Counter<"upstream" | "reason">;
  /** Unix time at which the interception CA's certificate expires (set once it is loaded; 0 without). */
  interceptCaExpiryTimestampSeconds: Gauge;
  /** Requests waiting for a pacing turn or a pause, all upstreams (`limits.maxWaiting`). */
  waitingRequests: Gauge;
  /** Where `rateLimitQueueDepth` reads from: waiting requests by upstream, at each scrape. */
  watchRateLimitQueues(source: () => Iterable<readonly [string, number]>): void;
  /** Where `waitingRequests` reads from, at each scrape. */
  watchWaiting(source: () => number): void;
  /** The last 15 minutes of request and error counts, for the status page (not exported). */
  requestRates: RequestRates;
}

/** Methods outside this set are labelled "OTHER" so clients can't blow up cardinality. */
const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

/** The `method` label: known methods as they are, anything else "OTHER". */
export function methodLabel(method: string): string {
  return KNOWN_METHODS.has(method) ? method : "OTHER";
}

/** The `status_class` label ("2xx", "5xx", …). */
export function statusClass(status: number): string {
  return status >= 100 && status < 600 ? `${Math.floor(status / 100)}xx` : "other";
}

/** Gauges read at scrape from the parts that own the numbers (see the watch* methods). */
interface ScrapeSources {
  queueDepths?: (() => Iterable<readonly [string, number]>) | undefined;
  waiting?: (() => number) | undefined;
  checksWaiting?: (() => number) | undefined;
}

/**
 * Every instrument on a registry of its own, created by area in a fixed order (the order
 * /metrics lists them in).
 */
export function createMetrics(options: { collectProcessMetrics?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.collectProcessMetrics !== false) {
    // prom-client's own delay monitor is left dormant (one tick per timer maximum, 24.8 days):
    // event-loop-delay.ts replaces its gauges with ones fed from a 100 ms tick.
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: MAX_TIMER_MS });
    registerEventLoopDelay(registry);
  }
  const registers = [registry];
  const sources: ScrapeSources = {};
  return {
    registry,
    ...requestInstruments(registers),
    ...tokenInstruments(registers),
    ...processInstruments(registers),
    ...callerInstruments(registers, sources),
    ...pacingInstruments(registers, sources),
    ...interceptInstruments(registers),
    watchRateLimitQueues(source) {
      sources.queueDepths = source;
    },
    watchWaiting(source) {
      sources.waiting = source;
    },
    watchPasswordChecks(source) {
      sources.checksWaiting = source;
    },
    requestRates: createRequestRates(),
  };
}

/** What the proxy answered: requests, their durations, errors and 401 replays. */
function requestInstruments(
  registers: Registry[],
): Pick<
  Metrics,
  "requestsTotal" | "requestDurationSeconds" | "requestsInFlight" | "errorsTotal" | "replaysTotal"
> {
  return {
    requestsTotal: new Counter({
      name: "bearer_proxy_requests_total",
      help: "Requests proxied, by upstream, method and response status class.",
      labelNames: ["upstream", "method", "status_class"],
      registers,
    }),
    requestDurationSeconds: new SeriesHistogram({
      name: "bearer_proxy_request_duration_seconds",
      help: "Time from request received to response finished, by upstream, method and status class.",
      labelNames: ["upstream", "method", "status_class"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    requestsInFlight: new Gauge({
      name: "bearer_proxy_requests_in_flight",
      help: "Requests currently being proxied.",
      labelNames: ["upstream"],
      registers,
    }),
    errorsTotal: new Counter({
      name: "bearer_proxy_errors_total",
      help: "Errors the proxy itself answered with, by upstream and error code.",
      labelNames: ["upstream", "code"],
      registers,
    }),
    replaysTotal: new Counter({
      name: "bearer_proxy_replays_total",
      help: "Requests replayed with a fresh token after an upstream 401.",
      labelNames: ["upstream"],
      registers,
    }),
  };
}

/** The token sources: fetches, shared-cache hits, expiry, and the shared cache's Redis. */
function tokenInstruments(
  registers: Registry[],
): Pick<
  Metrics,
  | "tokenFetchesTotal"
  | "tokenSharedCacheHitsTotal"
  | "tokenFetchDurationSeconds"
  | "tokenExpiryTimestampSeconds"
  | "redisUp"
> {
  return {
    tokenFetchesTotal: new Counter({
      name: "bearer_proxy_token_fetches_total",
      help: "Token endpoint requests, by upstream and outcome (success or an error code); tokens taken from the shared Redis cache are counted in bearer_proxy_token_shared_cache_hits_total instead.",
      labelNames: ["upstream", "outcome"],
      registers,
    }),
    tokenSharedCacheHitsTotal: new Counter({
      name: "bearer_proxy_token_shared_cache_hits_total",
      help: "Tokens taken from the shared Redis cache (tokenCache.redis) instead of a token endpoint request, by upstream: another replica (or this one before a restart) had fetched them.",
      labelNames: ["upstream"],
      registers,
    }),
    tokenFetchDurationSeconds: new Histogram({
      name: "bearer_proxy_token_fetch_duration_seconds",
      help: "Duration of token endpoint requests.",
      labelNames: ["upstream"],
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    tokenExpiryTimestampSeconds: new Gauge({
      name: "bearer_proxy_token_expiry_timestamp_seconds",
      help: "Unix time at which the current token of each upstream expires.",
      labelNames: ["upstream"],
      registers,
    }),
    redisUp: new Gauge({
      name: "bearer_proxy_redis_up",
      help: "1 when the shared Redis token cache answers, 0 when the proxy fell back to local fetching.",
      registers,
    }),
  };
}

/** The process: configuration reloads and upgraded connections. */
function processInstruments(
  registers: Registry[],
): Pick<Metrics, "configReloadsTotal" | "upgradesOpen"> {
  return {
    configReloadsTotal: new Counter({
      name: "bearer_proxy_config_reloads_total",
      help: "Configuration reloads (SIGHUP or a config file change), by outcome: applied, rejected, restart_required.",
      labelNames: ["outcome"],
      registers,
    }),
    upgradesOpen: new Gauge({
      name: "bearer_proxy_upgrades_open",
      help: "Upgraded connections (WebSocket) open or awaiting the upstream's 101, bounded by limits.maxUpgrades.",
      registers,
    }),
  };
}

/** The caller gate: refusals and password checks. */
function callerInstruments(
  registers: Registry[],
  sources: ScrapeSources,
): Pick<
  Metrics,
  "callerDeniedTotal" | "callerPasswordChecksTotal" | "callerPasswordChecksWaiting"
> {
  return {
    callerDeniedTotal: new Counter({
      name: "bearer_proxy_caller_denied_total",
      help: "Requests refused by an upstream's allow list, by upstream and reason (no_credential, invalid_credential, not_allowed, throttled, keys_unavailable, checks_busy).",
      labelNames: ["upstream", "reason"],
      registers,
    }),
    callerPasswordChecksTotal: new Counter({
      name: "bearer_proxy_caller_password_checks_total",
      help: "bcrypt password checks started for callers.basic (each one costs a thread-pool thread ~70 ms at cost 10).",
      registers,
    }),
    callerPasswordChecksWaiting: new Gauge({
      name: "bearer_proxy_caller_password_checks_waiting",
      help: "Password checks waiting for a free slot (callers.basic.maxConcurrentChecks), at most callers.basic.maxQueuedChecks.",
      registers,
      collect() {
        this.set(sources.checksWaiting?.() ?? 0);
      },
    }),
  };
}

/** Pacing: refusals, queues, waits, retries and the waiting room. */
function pacingInstruments(
  registers: Registry[],
  sources: ScrapeSources,
): Pick<
  Metrics,
  | "rateLimitedTotal"
  | "rateLimitQueueDepth"
  | "rateLimitWaitSeconds"
  | "retriesTotal"
  | "waitingRequests"
> {
  return {
    rateLimitedTotal: new Counter({
      name: "bearer_proxy_rate_limited_total",
      help: "Pacing (upstreams[].rateLimit), by upstream and reason: limit (answered 429 rate_limited), paused (answered 429 upstream_rate_limited during the upstream's pause), max_waiting and max_waiting_per_caller (answered 429 rate_limited: no place among the waiting, limits.maxWaiting / maxWaitingPerCaller), upstream_429 and upstream_503 (the upstream answered with Retry-After and paused its traffic).",
      labelNames: ["upstream", "reason"],
      registers,
    }),
    rateLimitQueueDepth: new Gauge({
      name: "bearer_proxy_rate_limit_queue_depth",
      help: "Requests waiting for their turn (rateLimit.wait, or an upstream's pause), by upstream.",
      labelNames: ["upstream"],
      registers,
      collect() {
        this.reset();
        const queueDepths = sources.queueDepths;
        if (queueDepths === undefined) return;
        for (const [upstream, depth] of queueDepths()) this.set({ upstream }, depth);
      },
    }),
    rateLimitWaitSeconds: new Histogram({
      name: "bearer_proxy_rate_limit_wait_seconds",
      help: "How long requests that had to wait for their turn waited before going upstream (requests admitted at once are not observed).",
      labelNames: ["upstream"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    }),
    retriesTotal: new Counter({
      name: "bearer_proxy_retries_total",
      help: "Requests sent again (upstreams[].retry), by upstream and reason: connect, reset, 502, 503, 504.",
      labelNames: ["upstream", "reason"],
      registers,
    }),
    waitingRequests: new Gauge({
      name: "bearer_proxy_waiting_requests",
      help: "Requests waiting for a pacing turn or an upstream's pause, over every upstream (out of limits.maxInFlight while they wait; bounded by limits.maxWaiting).",
      registers,
      collect() {
        const waiting = sources.waiting;
        if (waiting !== undefined) this.set(waiting());
      },
    }),
  };
}

/** CONNECT interception: refused handshakes and the CA's expiry. */
function interceptInstruments(
  registers: Registry[],
): Pick<Metrics, "interceptHandshakeFailuresTotal" | "interceptCaExpiryTimestampSeconds"> {
  return {
    interceptHandshakeFailuresTotal: new Counter({
      name: "bearer_proxy_intercept_handshake_failures_total",
      help: "TLS handshakes of terminated CONNECTs that failed, by upstream and reason: untrusted_ca (the client refused the leaf certificate: it does not trust the interception CA, or pins another), timeout, closed, other.",
      labelNames: ["upstream", "reason"],
      registers,
    }),
    interceptCaExpiryTimestampSeconds: new Gauge({
      name: "bearer_proxy_intercept_ca_expiry_timestamp_seconds",
      help: "Unix time at which the interception CA certificate (intercept.caCertFile) expires; 0 without intercept.",
      registers,
    }),
  };
}
