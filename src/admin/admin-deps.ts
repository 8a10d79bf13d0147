/**
 * What the admin listener reads: the config, the live token, pacing and callers state, the
 * lifecycle and metrics. One set of deps serves both ways in (admin-listener.ts): the probe fast
 * path and the fastify instance built on first use.
 */
import type { CallersStatus } from "../callers/caller-types.js";
import type { Denial } from "../callers/denial-log.js";
import type { CaSummary } from "../config/intercept-ca.js";
import type { ProxyConfig, UpstreamConfig } from "../config/proxy-config.js";
import type { Lifecycle } from "../lifecycle.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { RateLimitStatus } from "../pacing/pacing-status.js";
import type { TokenStatus } from "../token/token-provider.js";
import type { TokenMode } from "../token/token-registry.js";
import type { ReadinessCondition } from "./readiness.js";
import type { LastReload } from "./status-report.js";

export interface AdminServerDeps {
  config: ProxyConfig;
  /** Upstreams to report, in display order. */
  upstreamNames: readonly string[];
  upstreams: readonly UpstreamConfig[];
  /** Secret-free token status of one upstream (token registry). */
  tokenStatus(upstreamName: string): TokenStatus;
  lifecycle: Lifecycle;
  metrics: Metrics;
  logger: Logger;
  /** Called once, after the 202 of the first accepted POST /quitquitquit was sent. */
  onQuit: () => void;
  startedAtWallMs: number;
  version: string;
  /** Wall clock; default Date.now. */
  now?: () => number;
  /**
   * State of the Redis shared token cache ("up", "down", "connecting"), when `tokenCache.redis`
   * is configured; /status shows it. Without it /status has no shared-cache entry.
   */
  sharedCacheState?: () => string;
  /** How an upstream's token is fetched (token registry); default: its config's token.prefetch. */
  tokenMode?: (upstreamName: string) => TokenMode;
  /** Readiness conditions besides tokens and the lifecycle (e.g. sustained overload). */
  readinessConditions?: () => readonly ReadinessCondition[];
  /** Monotonic clock of the request rates; default performance.now. */
  monotonicNow?: () => number;
  /**
   * The upstreams to report now, in display order, when they can change (a reload swaps the
   * list); default: `upstreamNames` resolved once.
   */
  currentUpstreams?: () => readonly UpstreamConfig[];
  /** The readiness policy now (a reload may change it); default `config.readiness`. */
  currentReadiness?: () => ProxyConfig["readiness"];
  /** The limits now (a reload may change them); default `config.limits`. */
  currentLimits?: () => ProxyConfig["limits"];
  /** The last configuration reload, shown on /status. */
  lastReload?: () => LastReload | undefined;
  /** Recent refusals by `upstreams[].allow`, shown on /status. */
  callerDenials?: () => Denial[];
  /** The callers room's state (users file, password checks, blocks), shown on /status. */
  callersStatus?: () => CallersStatus | undefined;
  /** An upstream's pacing (limit, queue, pause, retry budget) for /status; undefined: none. */
  rateLimitStatus?: (upstreamName: string) => RateLimitStatus | undefined;
  /** The interception CA once loaded (`intercept`); /status shows its public facts. */
  interceptCa?: () => CaSummary | undefined;
}
