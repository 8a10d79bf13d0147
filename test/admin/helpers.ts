import { Writable } from "node:stream";
import type { FastifyInstance } from "fastify";
import { createAdminServer } from "../../src/admin/admin-server.js";
import type { ProxyConfig, UpstreamConfig } from "../../src/config/types.js";
import { createLifecycle, type Lifecycle } from "../../src/lifecycle.js";
import { createLogger } from "../../src/observability/logger.js";
import { createMetrics, type Metrics } from "../../src/observability/metrics.js";
import { fingerprint } from "../../src/token/fingerprint.js";
import type { TokenStatus } from "../../src/token/types.js";

/** A runtime upstream config with test defaults; override anything. */
export function makeUpstreamConfig(
  name: string,
  overrides: Partial<UpstreamConfig> & { baseUrl?: string } = {},
): UpstreamConfig {
  const baseUrl = overrides.baseUrl ?? `https://${name}.example.test`;
  const url = new URL(baseUrl);
  const tls = { caFile: undefined, certFile: undefined, keyFile: undefined, serverName: undefined };
  return {
    name,
    baseUrl,
    origin: url.origin,
    basePath: url.pathname === "/" ? "" : url.pathname.replace(/\/$/, ""),
    apiVersion: "default",
    versionHeader: undefined,
    token: {
      tokenUrl: `${url.origin}/iam/v1/oauth2/token`,
      versionHeader: undefined,
      format: "form",
      clientAuth: "body",
      clientId: { kind: "inline", value: "demo-client" },
      clientSecret: { kind: "inline", value: "demo-secret" },
      scope: undefined,
      extraParams: {},
      extraHeaders: {},
      tls,
      allowInsecureHttp: false,
    },
    tokenPolicy: {
      defaultExpiresInMs: 600_000,
      refreshWindow: [0.5, 0.75],
      requestTimeoutMs: 2_000,
      waitTimeoutMs: 2_000,
      minAgeBeforeInvalidateMs: 1_000,
      minRefreshIntervalMs: 1_000,
      initialBackoffMs: 100,
      maxBackoffMs: 1_000,
      prefetch: true,
    },
    tls,
    match: { pathPrefix: "/", hosts: [] },
    stripPrefix: false,
    listen: undefined,
    allowInsecureHttp: false,
    clientCredentials: "strip",
    forwardedHeaders: true,
    headers: {},
    replayBodyLimitBytes: 65_536,
    connections: 4,
    timeouts: { connectMs: 2_000, responseHeadersMs: 5_000, bodyIdleMs: 5_000 },
    ...overrides,
  };
}

/** A runtime proxy config around the given upstreams. */
export function makeProxyConfig(upstreams: UpstreamConfig[]): ProxyConfig {
  return {
    listen: { host: "127.0.0.1", port: 0 },
    admin: { host: "127.0.0.1", port: 0 },
    log: { level: "info", format: "json" },
    egressProxy: undefined,
    limits: {
      maxHeaderSizeBytes: 16_384,
      maxHeaderCount: 100,
      maxUrlLengthBytes: 8_192,
      headersTimeoutMs: 10_000,
      keepAliveTimeoutMs: 5_000,
      maxConnections: 1_000,
    },
    shutdown: { drainDelayMs: 5_000, timeoutMs: 30_000 },
    tokenCache: { redis: undefined, maxSources: 100, eagerLimit: 10 },
    upstreams,
  };
}

export const NOW_WALL_MS = Date.UTC(2026, 9, 1, 12, 0, 0);

/** A status for a token obtained `ageMs` ago with `lifetimeMs` lifetime. */
export function validStatus(token: string, overrides: Partial<TokenStatus> = {}): TokenStatus {
  return {
    state: "valid",
    fingerprint: fingerprint(token),
    scope: "files:read files:write",
    expiresAtWallMs: NOW_WALL_MS + 540_000,
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
  return {
    state: "idle",
    fingerprint: undefined,
    scope: undefined,
    expiresAtWallMs: undefined,
    lastFetchAtWallMs: undefined,
    lastFetchDurationMs: undefined,
    lastError: undefined,
    nextRefreshAtWallMs: undefined,
    fetchCount: 0,
    failureCount: 0,
    ...overrides,
  };
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
}

export interface TestAdminOptions {
  upstreams?: UpstreamConfig[];
  statuses?: Record<string, TokenStatus>;
  /** Lifecycle phase to start in; default running (and started). */
  phase?: "starting" | "running" | "draining";
  version?: string;
}

/** An admin server (not listening) over fake token statuses; close `app` after the test. */
export function buildTestAdmin(options: TestAdminOptions = {}): TestAdmin {
  const upstreams = options.upstreams ?? [makeUpstreamConfig("files")];
  const config = makeProxyConfig(upstreams);
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
  const metrics = createMetrics({ collectProcessMetrics: true });
  const logLines: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, callback) {
      logLines.push(String(chunk));
      callback();
    },
  });
  let quits = 0;
  const app = createAdminServer({
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
  });
  return { app, lifecycle, metrics, statuses, config, quitCalls: () => quits, logLines };
}
