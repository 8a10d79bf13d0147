/**
 * The admin listener (its own port, never the proxy's): probes for Kubernetes, Prometheus
 * metrics, a status page, and /quitquitquit for Jobs whose sidecar must end with the app
 * (Envoy and Istio use the same path). Builds the fastify instance; never listens itself.
 */

import Fastify, { type FastifyInstance } from "fastify";
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
import { LAZY_SCHEMA_COMPILERS } from "./lazy-schema-compilers.js";
import { quitRefusal } from "./quit-guard.js";
import type { ReadinessCondition } from "./readiness.js";
import { createScrubber, type Scrubber } from "./redact.js";
import { interceptStatus } from "./status-intercept.js";
import type { LastReload } from "./status-report.js";
import { registerStatusRoutes } from "./status-routes.js";

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

/** The admin endpoints, listed in 404 answers so a mistyped probe path is easy to fix. */
export const ADMIN_ENDPOINTS = [
  "GET /livez",
  "GET /readyz",
  "GET /startup",
  "GET /metrics",
  "GET /status",
  "GET /status/upstreams/:name",
  "POST /quitquitquit",
] as const;

/** Build the admin fastify instance (not listening; the caller calls `listen`). */
export function createAdminServer(deps: AdminServerDeps): FastifyInstance {
  const now = deps.now ?? Date.now;
  const startConfigs = resolveUpstreams(deps);
  const upstreamsNow = deps.currentUpstreams ?? (() => startConfigs);
  // Rebuilt when a reload swaps the upstream list: new inline secrets must be scrubbed too.
  let scrubbedFor: readonly UpstreamConfig[] | undefined;
  let scrubber: Scrubber = createScrubber([...deps.config.upstreams, ...deps.upstreams]);
  const scrub: Scrubber = (text) => {
    const current = upstreamsNow();
    if (deps.currentUpstreams && current !== scrubbedFor) {
      scrubbedFor = current;
      scrubber = createScrubber([...deps.config.upstreams, ...deps.upstreams, ...current]);
    }
    return scrubber(text);
  };
  // Probes hit this every few seconds: only warnings and errors are worth a log line (the warn
  // level also silences fastify's per-request info lines).
  const app = Fastify({
    loggerInstance: deps.logger.child({ component: "admin" }, { level: "warn" }),
    exposeHeadRoutes: true,
    bodyLimit: 1024,
    schemaController: LAZY_SCHEMA_COMPILERS,
  }) as unknown as FastifyInstance;
  // `curl -X POST -H 'content-type: application/json' …/quitquitquit` sends no body: an empty
  // JSON body is no body here, not the 400 fastify's own parser answers.
  app.removeContentTypeParser("application/json");
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    if (body === "") {
      done(null, undefined);
      return;
    }
    try {
      done(null, JSON.parse(body as string));
    } catch {
      done(Object.assign(new Error("the body is not valid JSON"), { statusCode: 400 }), undefined);
    }
  });

  const configModes = new Map(
    startConfigs.map((c): [string, TokenMode] => [
      c.name,
      { mode: c.tokenPolicy.prefetch ? "prefetch" : "lazy", decidedBy: "token.prefetch" },
    ]),
  );
  const modeOf = deps.tokenMode ?? ((name: string): TokenMode => configModes.get(name)!);
  const snapshot = () =>
    upstreamsNow().map((config) => ({
      config,
      status: deps.tokenStatus(config.name),
      mode: modeOf(config.name),
      rateLimitOf: deps.rateLimitStatus,
    }));

  app.addHook("onSend", async (_request, reply) => {
    // Admin answers are live data; only the status page's content-named files may be cached.
    if (!reply.hasHeader("cache-control")) reply.header("cache-control", "no-store");
    reply.header("x-content-type-options", "nosniff");
  });

  app.get("/livez", async () => ({ status: "ok" }));

  app.get("/startup", async (_request, reply) => {
    const started = deps.lifecycle.started;
    return reply.code(started ? 200 : 503).send({ status: started ? "started" : "starting" });
  });

  app.get("/metrics", async (_request, reply) => {
    updateExpiryGauge(deps.metrics, snapshot());
    const text = await deps.metrics.registry.metrics();
    return reply.type(deps.metrics.registry.contentType).send(text);
  });

  registerStatusRoutes(app, {
    snapshot,
    readiness: deps.config.readiness,
    readinessConditions: () => [
      overloadCondition(deps.lifecycle, deps.config.limits.sustainedOverloadMs),
      ...(deps.readinessConditions?.() ?? []),
    ],
    lifecycle: deps.lifecycle,
    metrics: deps.metrics,
    scrub,
    version: deps.version,
    startedAtWallMs: deps.startedAtWallMs,
    now,
    monotonicNow: deps.monotonicNow ?? (() => performance.now()),
    sharedCacheState: deps.sharedCacheState,
    lastReload: deps.lastReload,
    callerDenials: deps.callerDenials,
    callersStatus: deps.callersStatus,
    currentReadiness: deps.currentReadiness,
    intercept: () =>
      deps.config.intercept === undefined
        ? undefined
        : interceptStatus(deps.interceptCa?.(), upstreamsNow(), now()),
    currentLimits: deps.currentLimits ?? (() => deps.config.limits),
  });

  let quitting = false;
  app.post(
    "/quitquitquit",
    {
      // Before the body is parsed: a form POST must get the same 403, not fastify's 415.
      onRequest: async (request, reply) => {
        const remote = request.raw.socket.remoteAddress;
        const refusal = quitRefusal(remote, request.headers);
        if (!refusal) return;
        request.log.warn(
          { remoteAddress: remote, origin: request.headers.origin, reason: refusal.message },
          "refused /quitquitquit",
        );
        return reply.code(403).send({ error: { code: "forbidden", message: refusal.message } });
      },
    },
    async (request, reply) => {
      if (!quitting) {
        quitting = true;
        request.log.warn("shutdown requested via /quitquitquit");
        // Quit only after the 202 is on the wire, so the caller learns it was accepted.
        reply.raw.once("finish", () => deps.onQuit());
      }
      return reply.code(202).send({ status: "quitting" });
    },
  );

  app.setNotFoundHandler(async (request, reply) =>
    reply.code(404).send({
      error: {
        code: "not_found",
        message: `no admin endpoint ${request.method} ${request.url.split("?")[0]}`,
        endpoints: ADMIN_ENDPOINTS,
      },
    }),
  );

  app.setErrorHandler(async (error, request, reply) => {
    const status = statusOf(error);
    if (status >= 500) request.log.error({ err: error }, "admin endpoint failed");
    return reply.code(status).send({
      error: {
        code: status >= 500 ? "internal_error" : "bad_request",
        message: status >= 500 ? "admin endpoint failed" : scrub(messageOf(error)),
      },
    });
  });

  return app;
}

/**
 * Set the expiry gauge from the token statuses at scrape time, so it is right whether or not the
 * token engine sets it; upstreams without a token lose the series instead of showing a stale one.
 */
function updateExpiryGauge(
  metrics: Metrics,
  statuses: readonly { config: UpstreamConfig; status: TokenStatus }[],
): void {
  for (const { config, status } of statuses) {
    const usable = status.state === "valid" || status.state === "degraded";
    if (usable && status.expiresAtWallMs !== undefined) {
      metrics.tokenExpiryTimestampSeconds.set(
        { upstream: config.name },
        Math.floor(status.expiresAtWallMs / 1000),
      );
    } else {
      metrics.tokenExpiryTimestampSeconds.remove({ upstream: config.name });
    }
  }
}

// Every name must have a config: a mismatch is a wiring bug, so fail when the server is built.
function resolveUpstreams(deps: AdminServerDeps): UpstreamConfig[] {
  const byName = new Map([...deps.config.upstreams, ...deps.upstreams].map((u) => [u.name, u]));
  return deps.upstreamNames.map((name) => {
    const config = byName.get(name);
    if (!config)
      throw new TypeError(`admin server: no config for upstream ${JSON.stringify(name)}`);
    return config;
  });
}

function statusOf(error: unknown): number {
  const code = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof code === "number" && code >= 400 && code < 600 ? code : 500;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : "bad request";
}

/**
 * Sustained overload (base/process-load.ts): refusals over limits.maxInFlight for
 * limits.sustainedOverload make the replica unready, so a gateway sheds load to its peers.
 */
function overloadCondition(lifecycle: Lifecycle, sustainedMs: number): ReadinessCondition {
  const overloaded = lifecycle.load.overloadedFor(sustainedMs);
  return {
    name: "overload",
    ready: !overloaded,
    reason: overloaded
      ? `requests have been refused over limits.maxInFlight for ${sustainedMs} ms`
      : "keeping up",
  };
}
