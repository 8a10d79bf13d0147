/**
 * The admin listener (its own port, never the proxy's): probes for Kubernetes, Prometheus
 * metrics, a status page, and /quitquitquit for Jobs whose sidecar must end with the app
 * (Envoy and Istio use the same path). Builds the fastify instance; never listens itself.
 */
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import type { ProxyConfig, UpstreamConfig } from "../config/types.js";
import type { Lifecycle } from "../lifecycle.js";
import type { Logger } from "../observability/logger.js";
import type { Metrics } from "../observability/metrics.js";
import type { TokenStatus } from "../token/types.js";
import { LAZY_SCHEMA_COMPILERS } from "./lazy-schema-compilers.js";
import { isLoopbackAddress } from "./loopback.js";
import { evaluateReadiness, type Readiness } from "./readiness.js";
import { createScrubber, scrubDeep } from "./redact.js";
import { renderStatusPage, STATUS_PAGE_CSP } from "./status-page.js";
import { buildStatusReport } from "./status-report.js";

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
}

/** The admin endpoints, listed in 404 answers so a mistyped probe path is easy to fix. */
export const ADMIN_ENDPOINTS = [
  "GET /livez",
  "GET /readyz",
  "GET /startup",
  "GET /metrics",
  "GET /status",
  "POST /quitquitquit",
] as const;

/** Build the admin fastify instance (not listening; the caller calls `listen`). */
export function createAdminServer(deps: AdminServerDeps): FastifyInstance {
  const now = deps.now ?? Date.now;
  const scrub = createScrubber([...deps.config.upstreams, ...deps.upstreams]);
  const configs = resolveUpstreams(deps);
  // Probes hit this every few seconds: only warnings and errors are worth a log line (the warn
  // level also silences fastify's per-request info lines).
  const app = Fastify({
    loggerInstance: deps.logger.child({ component: "admin" }, { level: "warn" }),
    exposeHeadRoutes: true,
    bodyLimit: 1024,
    schemaController: LAZY_SCHEMA_COMPILERS,
  }) as unknown as FastifyInstance;

  const snapshot = () =>
    configs.map((config) => ({ config, status: deps.tokenStatus(config.name) }));
  const readiness = (statuses = snapshot()): Readiness =>
    evaluateReadiness({
      phase: deps.lifecycle.phase,
      upstreams: statuses.map(({ config, status }) => ({
        name: config.name,
        prefetch: config.tokenPolicy.prefetch,
        status,
      })),
    });

  app.addHook("onSend", async (_request, reply) => {
    reply.header("cache-control", "no-store");
    reply.header("x-content-type-options", "nosniff");
  });

  app.get("/livez", async () => ({ status: "ok" }));

  app.get("/readyz", async (_request, reply) => {
    const result = readiness();
    return reply.code(result.statusCode).send(scrubDeep(result.body, scrub));
  });

  app.get("/startup", async (_request, reply) => {
    const started = deps.lifecycle.started;
    return reply.code(started ? 200 : 503).send({ status: started ? "started" : "starting" });
  });

  app.get("/metrics", async (_request, reply) => {
    updateExpiryGauge(deps.metrics, snapshot());
    const text = await deps.metrics.registry.metrics();
    return reply.type(deps.metrics.registry.contentType).send(text);
  });

  app.get("/status", async (request, reply) => {
    const statuses = snapshot();
    const raw = await buildStatusReport({
      version: deps.version,
      phase: deps.lifecycle.phase,
      ready: readiness(statuses).ready,
      startedAtWallMs: deps.startedAtWallMs,
      nowWallMs: now(),
      upstreams: statuses,
      metrics: deps.metrics,
      sharedCacheState: deps.sharedCacheState?.(),
    });
    const report = scrubDeep(raw, scrub);
    reply.header("vary", "accept");
    if (wantsHtml(request)) {
      reply.header("content-security-policy", STATUS_PAGE_CSP);
      reply.header("x-frame-options", "DENY");
      reply.header("referrer-policy", "no-referrer");
      return reply.type("text/html; charset=utf-8").send(renderStatusPage(report));
    }
    return reply.send(report);
  });

  let quitting = false;
  app.post("/quitquitquit", async (request, reply) => {
    const remote = request.raw.socket.remoteAddress;
    if (!isLoopbackAddress(remote)) {
      request.log.warn(
        { remoteAddress: remote },
        "refused /quitquitquit from a non-loopback address",
      );
      return reply.code(403).send({
        error: { code: "forbidden", message: "/quitquitquit is accepted only from loopback" },
      });
    }
    if (!quitting) {
      quitting = true;
      request.log.warn("shutdown requested via /quitquitquit");
      // Quit only after the 202 is on the wire, so the caller learns it was accepted.
      reply.raw.once("finish", () => deps.onQuit());
    }
    return reply.code(202).send({ status: "quitting" });
  });

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

/** HTML when the client asks for it (browsers), JSON otherwise (curl sends `*` / `*`). */
function wantsHtml(request: FastifyRequest): boolean {
  const format = (request.query as Record<string, unknown> | undefined)?.format;
  if (format === "html") return true;
  if (format === "json") return false;
  const accept = request.headers.accept ?? "";
  return /\btext\/html\b/i.test(accept);
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
