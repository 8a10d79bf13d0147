/**
 * The /status snapshot: a summary of every upstream (counts by token state and mode, gateway-wide
 * rates, the worst upstreams), then one page of upstreams picked by the query, each with its
 * configuration, token state, request counts and recent rates; and the detail of one upstream
 * (15-minute series, token timeline). Built from secret-free inputs only (TokenStatus, config
 * URLs without userinfo, counters); the admin server scrubs the result once more before it
 * leaves. Only the page's rows are built in full, so 10,000 upstreams cost little more than 100.
 */
import { summarizeAllowRule } from "../callers/allow.js";
import type { CallersStatus } from "../callers/caller-types.js";
import type { Denial } from "../callers/denial-log.js";
import type { ClientAuthMethod, ReadinessConfig, UpstreamConfig } from "../config/proxy-config.js";
import { isPolicyRefusal } from "../errors.js";
import type { LifecyclePhase } from "../lifecycle.js";
import type { Metrics } from "../observability/metrics.js";
import type { RateSeries, RecentRate } from "../observability/request-rates.js";
import type { RateLimitStatus, WaitingStatus } from "../pacing/pacing-status.js";
import { tokenNotSharedReason } from "../token/shared-token-source.js";
import type { TokenOrigin, TokenState, TokenStatus } from "../token/token-provider.js";
import type { TokenMode } from "../token/token-registry.js";
import { displayUrl } from "./redact.js";
import type { InterceptStatus } from "./status-intercept.js";
import {
  applyStatusQuery,
  isProblem,
  problemRank,
  type QueryableUpstream,
  type StatusQuery,
  TOKEN_STATES,
} from "./status-query.js";

export interface TokenReport {
  state: TokenState;
  /** First 8 hex of sha256(token); never the token. */
  fingerprint: string | null;
  scope: string | null;
  expiresAt: string | null;
  secondsToExpiry: number | null;
  lastFetchAt: string | null;
  lastFetchDurationMs: number | null;
  /** `excerpt`: scrubbed start of a token endpoint's non-RFC 6749 error body, when it sent one. */
  lastError: { code: string; message: string; at: string; excerpt?: string } | null;
  nextRefreshAt: string | null;
  /** Token endpoint requests (failed ones included); tokens read from the shared cache are not. */
  fetchCount: number;
  failureCount: number;
  /** Tokens taken from the shared Redis cache (`tokenCache.redis`) instead of a request. */
  sharedCacheHits: number;
  /**
   * Where the current token came from: this replica's token endpoint request, or the shared
   * cache (another replica's request); when this replica got it, and when it was issued.
   * Null without a current token.
   */
  origin: { source: TokenOrigin; receivedAt: string; issuedAt: string } | null;
}

export interface RequestCounts {
  total: number;
  /** Responses by status class ("2xx", "5xx", ...), summed over methods. */
  byStatusClass: Record<string, number>;
  inFlight: number;
  /** Errors the proxy answered itself. */
  errors: number;
  errorsByCode: Record<string, number>;
  /**
   * Of `errors`, those answered by policy (`allow`, `rateLimit`: errors.ts isPolicyRefusal):
   * the gateway working, not trouble; the rates and the problem list leave them out.
   */
  policyRefusals: number;
  /** Requests replayed with a fresh token after an upstream 401. */
  replays: number;
}

/** How requests reach an upstream (`listen`, `match`), as the router sees them. */
export interface RouteReport {
  /** The upstream's own listener (`host:port`), or null: the main listener. */
  listen: string | null;
  /** `match.hosts`; empty: any host. */
  hosts: readonly string[];
  pathPrefix: string;
  stripPrefix: boolean;
}

export interface UpstreamReport {
  name: string;
  baseUrl: string;
  apiVersion: string;
  tokenUrl: string;
  route: RouteReport;
  /** True when the token is fetched at start; false for lazy upstreams (fetched on first use). */
  prefetch: boolean;
  /** How the proxy authenticates to the token endpoint (the method only, never key or secret). */
  clientAuth: ClientAuthMethod;
  /** Set when a shared cache is configured but this credential's tokens stay local, and why. */
  tokenNotShared?: string;
  /**
   * Present when `dpop` is set: the key's RFC 7638 thumbprint (the tokens' `cnf.jkt`) and its
   * algorithm; null until the first fetch loads the key. Never the key or a proof.
   */
  dpop?: { jkt: string | null; algorithm: string | null };
  /** The real mode and what decided it (token.prefetch, or tokenCache.eagerLimit). */
  tokenMode: TokenMode;
  token: TokenReport;
  requests: RequestCounts;
  /** Requests and errors (5xx and the proxy's own errors) of the last minute and 15 minutes. */
  rates: RecentRate;
  /** Who may use this upstream (`allow`, ORed) in short form; absent: anyone who reaches it. */
  allow?: string[];
  /** Pacing (`rateLimit`, the upstream's pause, retries); absent when there is nothing to show. */
  rateLimit?: RateLimitStatus;
}

/** A 15-minute series, oldest bucket first. */
export interface SeriesReport {
  bucketSeconds: number;
  /** Start of the oldest bucket. */
  startAt: string;
  requests: number[];
  errors: number[];
}

/** The points of a token's life, for the timeline picture. */
export interface TokenTimeline {
  /** When the current token was requested (its lifetime counts from here). */
  issuedAt: string | null;
  /** The policy's refresh window (token.refreshWindow of the lifetime). */
  refreshWindowFrom: string | null;
  refreshWindowTo: string | null;
  nextRefreshAt: string | null;
  expiresAt: string | null;
  now: string;
}

export interface UpstreamDetail extends UpstreamReport {
  series: SeriesReport;
  timeline: TokenTimeline;
}

export interface ProblemEntry {
  name: string;
  state: TokenState;
  errorsPerSecond: number;
  lastError: { code: string; message: string } | null;
}

export interface StatusSummary {
  upstreams: number;
  /** Every token state, zeros included. */
  byState: Record<TokenState, number>;
  byMode: { prefetch: number; lazy: number };
  /** Gateway-wide, every request (routed or not). */
  requests: RecentRate;
  /** Upstreams without a usable token, failing refreshes or answering errors now. */
  problemCount: number;
  /**
   * Requests answered by policy since start (`allow` refusals, `rateLimit`), by code, over every
   * upstream: counted apart from errors and problems.
   */
  policyRefusals: { total: number; byCode: Record<string, number> };
  /** The worst of them, at most SUMMARY_PROBLEMS. */
  problems: ProblemEntry[];
  /** Gateway-wide requests and errors of the last 15 minutes. */
  series: SeriesReport;
}

/** What the last configuration reload did (src/reload/apply.ts). */
export interface LastReload {
  at: string;
  trigger: "SIGHUP" | "file";
  outcome: "applied" | "rejected" | "restart_required";
  /** Why the new configuration was rejected (as `validate` prints them). */
  problems?: string[];
  /** The config paths that changed but can only apply on a restart. */
  restartRequired?: string[];
}

export interface StatusReport {
  version: string;
  phase: LifecyclePhase;
  ready: boolean;
  readiness: ReadinessConfig;
  startedAt: string;
  uptimeSeconds: number;
  generatedAt: string;
  /** Present only when a shared token cache (Redis) is configured. */
  sharedTokenCache?: { kind: "redis"; state: string };
  /** The last configuration reload (SIGHUP or a file change); absent until the first. */
  lastReload?: LastReload;
  /** Recent refusals by `upstreams[].allow` (newest first); absent when there were none. */
  callerDenials?: Denial[];
  /** CONNECT interception (status-intercept.ts); absent without `intercept`. */
  intercept?: InterceptStatus;
  /** Requests waiting for a pacing turn or a pause, and the places refused (`limits.maxWaiting`). */
  waiting?: WaitingStatus;
  /** The users file, password check queue and blocked addresses; absent when no rule names callers. */
  callers?: CallersStatus;
  summary: StatusSummary;
  /** The query as understood, and where this page sits among the matching upstreams. */
  page: {
    q: string;
    state: string;
    mode: string;
    sort: string;
    offset: number;
    limit: number;
    /** Upstreams matching the filters. */
    total: number;
    returned: number;
  };
  upstreams: UpstreamReport[];
}

/** How an upstream's URLs are shown (userinfo and query hidden), computed once per config. */
export interface UpstreamDisplay {
  baseUrl: string;
  baseUrlLower: string;
  tokenUrl: string;
}

/** A memo of UpstreamDisplay per config object (parsing 10,000 URLs per refresh adds up). */
export function createDisplayCache(): (config: UpstreamConfig) => UpstreamDisplay {
  const cache = new WeakMap<UpstreamConfig, UpstreamDisplay>();
  return (config) => {
    let display = cache.get(config);
    if (!display) {
      const baseUrl = displayUrl(config.baseUrl);
      display = {
        baseUrl,
        baseUrlLower: baseUrl.toLowerCase(),
        tokenUrl: displayUrl(config.token.tokenUrl),
      };
      cache.set(config, display);
    }
    return display;
  };
}

/** One upstream as the admin server knows it. */
export interface UpstreamSnapshot {
  config: UpstreamConfig;
  status: TokenStatus;
  mode: TokenMode;
  /** The upstream's pacing status by name (pacing/pacing-status.ts), read for the page's rows only. */
  rateLimitOf?: ((upstreamName: string) => RateLimitStatus | undefined) | undefined;
}

export interface StatusInput {
  version: string;
  phase: LifecyclePhase;
  ready: boolean;
  readiness: ReadinessConfig;
  startedAtWallMs: number;
  nowWallMs: number;
  /** `performance.now()` at the same moment (the rates' clock). */
  nowMs: number;
  upstreams: readonly UpstreamSnapshot[];
  metrics: Metrics;
  /** The Redis shared cache's state, or undefined when none is configured. */
  sharedCacheState?: string | undefined;
  lastReload?: LastReload | undefined;
  callerDenials?: Denial[] | undefined;
  intercept?: InterceptStatus | undefined;
  waiting?: WaitingStatus | undefined;
  callers?: CallersStatus | undefined;
  query: StatusQuery;
  /** The display cache (createDisplayCache); a fresh one when absent. */
  display?: (config: UpstreamConfig) => UpstreamDisplay;
}

/** Problems listed in the summary. */
export const SUMMARY_PROBLEMS = 10;

interface Row extends QueryableUpstream {
  snapshot: UpstreamSnapshot;
  rates: RecentRate;
}

/** Assemble the status snapshot: the summary over all upstreams, then the query's page. */
export async function buildStatusReport(input: StatusInput): Promise<StatusReport> {
  const display = input.display ?? createDisplayCache();
  const rows = toRows(input, display);
  const { total, page } = applyStatusQuery(rows, input.query);
  const counts = await readRequestCounts(input.metrics);
  const now = input.nowWallMs;
  return {
    version: input.version,
    phase: input.phase,
    ready: input.ready,
    readiness: input.readiness,
    startedAt: iso(input.startedAtWallMs) ?? "",
    uptimeSeconds: Math.max(0, Math.floor((now - input.startedAtWallMs) / 1000)),
    generatedAt: iso(now) ?? "",
    ...(input.sharedCacheState === undefined
      ? {}
      : { sharedTokenCache: { kind: "redis" as const, state: input.sharedCacheState } }),
    ...(input.lastReload ? { lastReload: input.lastReload } : {}),
    ...(input.callerDenials?.length ? { callerDenials: input.callerDenials } : {}),
    ...(input.intercept ? { intercept: input.intercept } : {}),
    ...(input.waiting ? { waiting: input.waiting } : {}),
    ...(input.callers ? { callers: input.callers } : {}),
    summary: summarize(rows, input, counts),
    page: {
      q: input.query.q,
      state: input.query.stateParam,
      mode: input.query.mode ?? "",
      sort: input.query.sort,
      offset: input.query.offset,
      limit: input.query.limit,
      total,
      returned: page.length,
    },
    upstreams: page.map((row) => upstreamReport(row, counts, now, display, input.sharedCacheState)),
  };
}

/** One upstream in full, with its 15-minute series and token timeline. */
export async function buildUpstreamDetail(
  input: Omit<
    StatusInput,
    "query" | "upstreams" | "version" | "phase" | "ready" | "readiness" | "startedAtWallMs"
  >,
  snapshot: UpstreamSnapshot,
): Promise<UpstreamDetail> {
  const display = input.display ?? createDisplayCache();
  const counts = await readRequestCounts(input.metrics);
  const rates = input.metrics.requestRates;
  const name = snapshot.config.name;
  const row: Row = {
    ...queryable(snapshot, 0, rates.recent(name, input.nowMs), display),
    snapshot,
    rates: rates.recent(name, input.nowMs),
  };
  return {
    ...upstreamReport(row, counts, input.nowWallMs, display, input.sharedCacheState),
    series: seriesReport(rates.series(name, input.nowMs), input.nowMs, input.nowWallMs),
    timeline: timeline(snapshot, input.nowWallMs),
  };
}

function toRows(input: StatusInput, display: (config: UpstreamConfig) => UpstreamDisplay): Row[] {
  const rates = input.metrics.requestRates;
  return input.upstreams.map((snapshot, index) => {
    const recent = rates.recent(snapshot.config.name, input.nowMs);
    return { ...queryable(snapshot, index, recent, display), snapshot, rates: recent };
  });
}

function queryable(
  snapshot: UpstreamSnapshot,
  index: number,
  recent: RecentRate,
  display: (config: UpstreamConfig) => UpstreamDisplay,
): QueryableUpstream {
  return {
    name: snapshot.config.name,
    baseUrlLower: display(snapshot.config).baseUrlLower,
    state: snapshot.status.state,
    mode: snapshot.mode.mode,
    index,
    errorsPerSecond: recent.errorsPerSecond,
  };
}

function summarize(
  rows: readonly Row[],
  input: StatusInput,
  counts: ReadonlyMap<string, RequestCounts>,
): StatusSummary {
  const byState = Object.fromEntries(TOKEN_STATES.map((s) => [s, 0])) as Record<TokenState, number>;
  const byMode = { prefetch: 0, lazy: 0 };
  const problems: Row[] = [];
  for (const row of rows) {
    byState[row.state]++;
    byMode[row.mode]++;
    if (isProblem(row)) problems.push(row);
  }
  problems.sort(
    (a, b) =>
      problemRank(a) - problemRank(b) || b.errorsPerSecond - a.errorsPerSecond || a.index - b.index,
  );
  const rates = input.metrics.requestRates;
  return {
    upstreams: rows.length,
    byState,
    byMode,
    requests: rates.totalRecent(input.nowMs),
    problemCount: problems.length,
    policyRefusals: totalPolicyRefusals(counts),
    problems: problems.slice(0, SUMMARY_PROBLEMS).map((row) => ({
      name: row.name,
      state: row.state,
      errorsPerSecond: row.errorsPerSecond,
      lastError: row.snapshot.status.lastError
        ? {
            code: row.snapshot.status.lastError.code,
            message: row.snapshot.status.lastError.message,
          }
        : null,
    })),
    series: seriesReport(rates.totalSeries(input.nowMs), input.nowMs, input.nowWallMs),
  };
}

function totalPolicyRefusals(
  counts: ReadonlyMap<string, RequestCounts>,
): StatusSummary["policyRefusals"] {
  const byCode: Record<string, number> = {};
  let total = 0;
  for (const upstream of counts.values()) {
    for (const [code, n] of Object.entries(upstream.errorsByCode)) {
      if (!isPolicyRefusal(code)) continue;
      byCode[code] = (byCode[code] ?? 0) + n;
      total += n;
    }
  }
  return { total, byCode };
}

function routeReport(config: UpstreamConfig): RouteReport {
  return {
    listen: config.listen ? `${config.listen.host}:${config.listen.port}` : null,
    hosts: config.match.hosts,
    pathPrefix: config.match.pathPrefix,
    stripPrefix: config.stripPrefix,
  };
}

function upstreamReport(
  row: Row,
  counts: ReadonlyMap<string, RequestCounts>,
  nowWallMs: number,
  display: (config: UpstreamConfig) => UpstreamDisplay,
  sharedCacheState: string | undefined,
): UpstreamReport {
  const { config, status, mode } = row.snapshot;
  const shown = display(config);
  return {
    name: config.name,
    baseUrl: shown.baseUrl,
    apiVersion: config.apiVersion,
    tokenUrl: shown.tokenUrl,
    route: routeReport(config),
    prefetch: mode.mode === "prefetch",
    tokenMode: mode,
    clientAuth: config.token.clientAuth,
    ...tokenSharing(config, sharedCacheState),
    ...dpopReport(config, status),
    token: tokenReport(status, nowWallMs),
    requests: counts.get(config.name) ?? emptyCounts(),
    rates: row.rates,
    ...(config.allow ? { allow: config.allow.map(summarizeAllowRule) } : {}),
    ...rateLimitReport(row.snapshot),
  };
}

function rateLimitReport(snapshot: UpstreamSnapshot): Pick<UpstreamReport, "rateLimit"> {
  const rateLimit = snapshot.rateLimitOf?.(snapshot.config.name);
  return rateLimit === undefined ? {} : { rateLimit };
}

function seriesReport(series: RateSeries, nowMs: number, nowWallMs: number): SeriesReport {
  return {
    bucketSeconds: series.bucketMs / 1000,
    startAt: iso(nowWallMs - (nowMs - series.startMs)) ?? "",
    requests: series.requests,
    errors: series.errors,
  };
}

function timeline(snapshot: UpstreamSnapshot, nowWallMs: number): TokenTimeline {
  const { status, config } = snapshot;
  const expires = status.expiresAtWallMs;
  const lifetime = status.lifetimeMs;
  const issued = expires !== undefined && lifetime !== undefined ? expires - lifetime : undefined;
  const [from, to] = config.tokenPolicy.refreshWindow;
  return {
    issuedAt: iso(issued),
    refreshWindowFrom: issued === undefined ? null : iso(issued + from * lifetime!),
    refreshWindowTo: issued === undefined ? null : iso(issued + to * lifetime!),
    nextRefreshAt: iso(status.nextRefreshAtWallMs),
    expiresAt: iso(expires),
    now: iso(nowWallMs) ?? "",
  };
}

function tokenSharing(
  config: UpstreamConfig,
  sharedCacheState: string | undefined,
): { tokenNotShared?: string } {
  const reason = sharedCacheState === undefined ? undefined : tokenNotSharedReason(config.token);
  return reason === undefined ? {} : { tokenNotShared: reason };
}

function dpopReport(config: UpstreamConfig, status: TokenStatus): Pick<UpstreamReport, "dpop"> {
  const spec = config.token.dpop;
  if (spec === undefined) return {};
  return {
    dpop: {
      jkt: status.dpop?.jkt ?? null,
      algorithm: status.dpop?.algorithm ?? spec.algorithm ?? null,
    },
  };
}

function tokenReport(status: TokenStatus, nowWallMs: number): TokenReport {
  const expires = status.expiresAtWallMs;
  return {
    state: status.state,
    fingerprint: status.fingerprint ?? null,
    scope: status.scope ?? null,
    expiresAt: iso(expires),
    secondsToExpiry: expires === undefined ? null : Math.floor((expires - nowWallMs) / 1000),
    lastFetchAt: iso(status.lastFetchAtWallMs),
    lastFetchDurationMs:
      status.lastFetchDurationMs === undefined ? null : Math.round(status.lastFetchDurationMs),
    lastError: status.lastError
      ? {
          code: status.lastError.code,
          message: status.lastError.message,
          at: iso(status.lastError.atWallMs) ?? "",
          ...(status.lastError.excerpt === undefined ? {} : { excerpt: status.lastError.excerpt }),
        }
      : null,
    nextRefreshAt: iso(status.nextRefreshAtWallMs),
    fetchCount: status.fetchCount,
    failureCount: status.failureCount,
    sharedCacheHits: status.sharedCacheHits ?? 0,
    origin: status.origin
      ? {
          source: status.origin.source,
          receivedAt: iso(status.origin.receivedAtWallMs) ?? "",
          issuedAt: iso(status.origin.issuedAtWallMs) ?? "",
        }
      : null,
  };
}

function iso(wallMs: number | undefined): string | null {
  if (wallMs === undefined || !Number.isFinite(wallMs)) return null;
  return new Date(wallMs).toISOString();
}

function emptyCounts(): RequestCounts {
  return {
    total: 0,
    byStatusClass: {},
    inFlight: 0,
    errors: 0,
    errorsByCode: {},
    policyRefusals: 0,
    replays: 0,
  };
}

async function readRequestCounts(metrics: Metrics): Promise<Map<string, RequestCounts>> {
  const byUpstream = new Map<string, RequestCounts>();
  const entry = (upstream: unknown): RequestCounts | undefined => {
    if (typeof upstream !== "string") return undefined;
    let counts = byUpstream.get(upstream);
    if (!counts) {
      counts = emptyCounts();
      byUpstream.set(upstream, counts);
    }
    return counts;
  };
  const [requests, inFlight, errors, replays] = await Promise.all([
    metrics.requestsTotal.get(),
    metrics.requestsInFlight.get(),
    metrics.errorsTotal.get(),
    metrics.replaysTotal.get(),
  ]);
  for (const { labels, value } of requests.values) {
    const counts = entry(labels.upstream);
    if (!counts) continue;
    const cls = String(labels.status_class ?? "other");
    counts.total += value;
    counts.byStatusClass[cls] = (counts.byStatusClass[cls] ?? 0) + value;
  }
  for (const { labels, value } of inFlight.values) {
    const counts = entry(labels.upstream);
    if (counts) counts.inFlight += value;
  }
  for (const { labels, value } of errors.values) {
    const counts = entry(labels.upstream);
    if (!counts) continue;
    const code = String(labels.code ?? "unknown");
    counts.errors += value;
    counts.errorsByCode[code] = (counts.errorsByCode[code] ?? 0) + value;
    if (isPolicyRefusal(code)) counts.policyRefusals += value;
  }
  for (const { labels, value } of replays.values) {
    const counts = entry(labels.upstream);
    if (counts) counts.replays += value;
  }
  return byUpstream;
}
