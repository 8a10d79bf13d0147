/**
 * The admin listener (its own port, never the proxy's): probes for Kubernetes, Prometheus
 * metrics, a status page, and /quitquitquit for Jobs whose sidecar must end with the app
 * (Envoy and Istio use the same path). Builds the fastify instance; never listens itself: the
 * admin listener (admin-listener.ts) loads this module on the first request its fast path does
 * not answer, and hands such requests to the instance's `routing`.
 */

import Fastify, { type FastifyInstance } from "fastify";
import type { AdminServerDeps } from "./admin-deps.js";
import { ADMIN_HEADERS, type AdminProbes, createAdminProbes, PROBE_PATHS } from "./admin-probes.js";
import { LAZY_SCHEMA_COMPILERS } from "./lazy-schema-compilers.js";
import { quitRefusal } from "./quit-guard.js";
import { interceptStatus } from "./status-intercept.js";
import { registerStatusRoutes } from "./status-routes.js";

export type { AdminServerDeps } from "./admin-deps.js";

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

/**
 * Build the admin fastify instance (not listening; the caller calls `listen`, or hands it
 * requests: admin-listener.ts). `probes`: the probe answers and state it shares with the
 * listener's fast path; built from `deps` when not given.
 */
export function createAdminServer(
  deps: AdminServerDeps,
  probes: AdminProbes = createAdminProbes(deps),
): FastifyInstance {
  const now = deps.now ?? Date.now;
  const { scrub, snapshot } = probes;
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

  app.addHook("onSend", async (_request, reply) => {
    // Only the status page's content-named files may be cached (they set their own).
    if (!reply.hasHeader("cache-control"))
      reply.header("cache-control", ADMIN_HEADERS["cache-control"]);
    reply.header("x-content-type-options", ADMIN_HEADERS["x-content-type-options"]);
  });

  // The same answers as the listener's fast path, which serves them without this instance.
  for (const path of PROBE_PATHS) {
    app.get(path, async (_request, reply) => {
      const answer = await probes.answer(path);
      return reply.code(answer.statusCode).type(answer.contentType).send(answer.body);
    });
  }

  registerStatusRoutes(app, {
    snapshot,
    readinessNow: probes.readinessNow,
    readinessConditions: probes.readinessConditions,
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
    intercept: () =>
      deps.config.intercept === undefined
        ? undefined
        : interceptStatus(deps.interceptCa?.(), probes.upstreams(), now()),
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

function statusOf(error: unknown): number {
  const code = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof code === "number" && code >= 400 && code < 600 ? code : 500;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : "bad request";
}
