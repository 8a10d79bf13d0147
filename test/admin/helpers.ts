import { Writable } from "node:stream";
import type { FastifyInstance } from "fastify";
import type { AdminServerDeps } from "../../src/admin/admin-deps.js";
import { createAdminServer } from "../../src/admin/admin-server.js";
import { fingerprint } from "../../src/base/fingerprint.js";
import type { Denial } from "../../src/callers/denial-log.js";
import type {
  ProxyConfig,
  ReadinessConfig,
  UpstreamConfig,
} from "../../src/config/proxy-config.js";
import { createLifecycle, type Lifecycle } from "../../src/lifecycle.js";
import { createLogger } from "../../src/observability/logger.js";
import { createMetrics, type Metrics } from "../../src/observability/metrics.js";
import type { TokenStatus } from "../../src/token/token-provider.js";
import type { TokenMode } from "../../src/token/token-registry.js";
import { emptyTokenStatus } from "../../src/token/token-status.js";
import { makeProxyConfig, makeUpstreamConfig } from "../helpers/upstream-config.js";

export { makeProxyConfig, makeUpstreamConfig } from "../helpers/upstream-config.js";

export const NOW_WALL_MS = Date.UTC(2026, 9, 1, 12, 0, 0);

/** A status for a token obtained `ageMs` ago with `lifetimeMs` lifetime. */
export function validStatus(token: string, overrides: Partial<TokenStatus> = {}): TokenStatus {
  return {
    state: "valid",
    fingerprint: fingerprint(token),
    scope: "files:read files:write",
    expiresAtWallMs: NOW_WALL_MS + 540_000,
    lifetimeMs: 600_000,
    lastFetchAtWallMs: NOW_WALL_MS - 59_000,
    lastFetchDurationMs: 42,
    lastError: undefined,
    nextRefreshAtWallMs: NOW_WALL_MS + 240_000,
    fetchCount: 1,
    failureCount: 0,
    ...overrides,
  };
}

export function idleStatus(overrides: Partial<TokenStatus> = {}): TokenStatus {
  return { ...emptyTokenStatus("idle"), ...overrides };
}

export function failedStatus(code: string, message: string): TokenStatus {
  return idleStatus({
    state: "failed",
    lastError: { code, message, atWallMs: NOW_WALL_MS - 1_000 },
    lastFetchAtWallMs: NOW_WALL_MS - 1_000,
    lastFetchDurationMs: 12,
    nextRefreshAtWallMs: NOW_WALL_MS + 4_000,
    fetchCount: 3,
    failureCount: 3,
  });
}

export interface TestAdmin {
  app: FastifyInstance;
  lifecycle: Lifecycle;
  metrics: Metrics;
  /** Mutable: tests change an upstream's status between requests. */
  statuses: Map<string, TokenStatus>;
  config: ProxyConfig;
  quitCalls: () => number;
  /** Log lines the admin server wrote (JSON strings). */
  logLines: string[];
  /** What `app` was built from: the admin listener under test takes the same (admin-listener.ts). */
  deps: AdminServerDeps;
}

export interface TestAdminOptions {
  upstreams?: UpstreamConfig[];
  statuses?: Record<string, TokenStatus>;
  /** Lifecycle phase to start in; default running (and started). */
  phase?: "starting" | "running" | "draining";
  version?: string;
  /** The Redis shared cache's state, as app/ passes it when tokenCache.redis is configured. */
  sharedCacheState?: () => string;
  /** The readiness policy; default as normalized for one upstream (all). */
  readiness?: ReadinessConfig;
  /** Token modes as the registry decides them; default from each upstream's token.prefetch. */
  tokenModes?: Record<string, TokenMode>;
  /** The rates' monotonic clock (performance.now by default). */
  monotonicNow?: () => number;
  /** Recent refusals by `allow`, newest first, as the caller gate's denial log keeps them. */
  callerDenials?: () => Denial[];
  /** Node's process metrics on /metrics (default on); off, two scrapes give the same text. */
  processMetrics?: boolean;
}

/** An admin server (not listening) over fake token statuses; close `app` after the test. */
export function buildTestAdmin(options: TestAdminOptions = {}): TestAdmin {
  const upstreams = options.upstreams ?? [makeUpstreamConfig("files")];
  const base = makeProxyConfig(upstreams);
  const config = options.readiness ? { ...base, readiness: options.readiness } : base;
  const statuses = new Map<string, TokenStatus>();
  for (const u of upstreams) {
    statuses.set(u.name, options.statuses?.[u.name] ?? validStatus(`token-of-${u.name}`));
  }
  const lifecycle = createLifecycle();
  const phase = options.phase ?? "running";
  if (phase !== "starting") {
    lifecycle.markStarted();
    lifecycle.markRunning();
  }
  if (phase === "draining") lifecycle.markDraining();
  const metrics = createMetrics({ collectProcessMetrics: options.processMetrics ?? true });
  const logLines: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, callback) {
      logLines.push(String(chunk));
      callback();
    },
  });
  let quits = 0;
  const deps: AdminServerDeps = {
    config,
    upstreamNames: upstreams.map((u) => u.name),
    upstreams,
    tokenStatus: (name) => {
      const status = statuses.get(name);
      if (!status) throw new Error(`no status for ${name}`);
      return status;
    },
    lifecycle,
    metrics,
    logger: createLogger({ level: "info", format: "json", destination }),
    onQuit: () => {
      quits += 1;
    },
    startedAtWallMs: NOW_WALL_MS - 3_725_000,
    version: options.version ?? "9.9.9-test",
    now: () => NOW_WALL_MS,
    ...(options.sharedCacheState ? { sharedCacheState: options.sharedCacheState } : {}),
    ...(options.tokenModes
      ? {
          tokenMode: (name: string) =>
            options.tokenModes?.[name] ?? { mode: "prefetch", decidedBy: "eagerLimit" },
        }
      : {}),
    ...(options.monotonicNow ? { monotonicNow: options.monotonicNow } : {}),
    ...(options.callerDenials ? { callerDenials: options.callerDenials } : {}),
  };
  const app = createAdminServer(deps);
  return { app, lifecycle, metrics, statuses, config, quitCalls: () => quits, logLines, deps };
}
