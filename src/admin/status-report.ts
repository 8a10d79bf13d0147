/**
 * The /status snapshot: configuration, token state and request counts per upstream. Built from
 * secret-free inputs only (TokenStatus, config URLs without userinfo, metric counters); the admin
 * server scrubs the result once more before the JSON or the HTML page leaves.
 */
import type { ClientAuthMethod, UpstreamConfig } from "../config/types.js";
import type { LifecyclePhase } from "../lifecycle.js";
import type { Metrics } from "../observability/metrics.js";
import { notSharedReason } from "../token/client-auth/shared-cache-secret.js";
import type { TokenState, TokenStatus } from "../token/types.js";
import { displayUrl } from "./redact.js";

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
  fetchCount: number;
  failureCount: number;
}

export interface RequestCounts {
  total: number;
  /** Responses by status class ("2xx", "5xx", ...), summed over methods. */
  byStatusClass: Record<string, number>;
  inFlight: number;
  /** Errors the proxy answered itself. */
  errors: number;
  errorsByCode: Record<string, number>;
  /** Requests replayed with a fresh token after an upstream 401. */
  replays: number;
}

export interface UpstreamReport {
  name: string;
  baseUrl: string;
  apiVersion: string;
  tokenUrl: string;
  /** False for lazy upstreams, which fetch their first token on first use. */
  prefetch: boolean;
  /** How the proxy authenticates to the token endpoint (the method only, never key or secret). */
  clientAuth: ClientAuthMethod;
  /** Set when a shared cache is configured but this credential's tokens stay local, and why. */
  tokenNotShared?: string;
  token: TokenReport;
  requests: RequestCounts;
}

export interface StatusReport {
  version: string;
  phase: LifecyclePhase;
  ready: boolean;
  startedAt: string;
  uptimeSeconds: number;
  generatedAt: string;
  /** Present only when a shared token cache (Redis) is configured. */
  sharedTokenCache?: { kind: "redis"; state: string };
  upstreams: UpstreamReport[];
}

export interface StatusInput {
  version: string;
  phase: LifecyclePhase;
  ready: boolean;
  startedAtWallMs: number;
  nowWallMs: number;
  upstreams: readonly { config: UpstreamConfig; status: TokenStatus }[];
  metrics: Metrics;
  /** The Redis shared cache's state, or undefined when none is configured. */
  sharedCacheState?: string | undefined;
}

/** Assemble the status snapshot; reads the metric counters once for all upstreams. */
export async function buildStatusReport(input: StatusInput): Promise<StatusReport> {
  const counts = await readRequestCounts(input.metrics);
  const now = input.nowWallMs;
  return {
    version: input.version,
    phase: input.phase,
    ready: input.ready,
    startedAt: iso(input.startedAtWallMs) ?? "",
    uptimeSeconds: Math.max(0, Math.floor((now - input.startedAtWallMs) / 1000)),
    generatedAt: iso(now) ?? "",
    ...(input.sharedCacheState === undefined
      ? {}
      : { sharedTokenCache: { kind: "redis" as const, state: input.sharedCacheState } }),
    upstreams: input.upstreams.map(({ config, status }) => ({
      name: config.name,
      baseUrl: displayUrl(config.baseUrl),
      apiVersion: config.apiVersion,
      tokenUrl: displayUrl(config.token.tokenUrl),
      prefetch: config.tokenPolicy.prefetch,
      clientAuth: config.token.clientAuth,
      ...tokenSharing(config, input.sharedCacheState),
      token: tokenReport(status, now),
      requests: counts.get(config.name) ?? emptyCounts(),
    })),
  };
}

function tokenSharing(
  config: UpstreamConfig,
  sharedCacheState: string | undefined,
): { tokenNotShared?: string } {
  const reason =
    sharedCacheState === undefined ? undefined : notSharedReason(config.token.clientAuth);
  return reason === undefined ? {} : { tokenNotShared: reason };
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
  };
}

function iso(wallMs: number | undefined): string | null {
  if (wallMs === undefined || !Number.isFinite(wallMs)) return null;
  return new Date(wallMs).toISOString();
}

function emptyCounts(): RequestCounts {
  return { total: 0, byStatusClass: {}, inFlight: 0, errors: 0, errorsByCode: {}, replays: 0 };
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
  }
  for (const { labels, value } of replays.values) {
    const counts = entry(labels.upstream);
    if (counts) counts.replays += value;
  }
  return byUpstream;
}
