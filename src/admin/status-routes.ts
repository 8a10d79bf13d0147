/**
 * /status with its page: the JSON snapshot (filters and paging), the HTML page, the
 * fragment the page fetches every few seconds to refresh in place, one upstream's detail, and
 * the page's own script and stylesheet (same-origin files: the CSP allows nothing inline).
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { CallersStatus } from "../callers/caller-types.js";
import type { Denial } from "../callers/denial-log.js";
import type { LimitsConfig, ReadinessConfig } from "../config/proxy-config.js";
import type { Lifecycle } from "../lifecycle.js";
import type { Metrics } from "../observability/metrics.js";
import { waitingStatus } from "../pacing/pacing-status.js";
import { blocksReadiness, type ReadinessCondition } from "./readiness.js";
import { type Scrubber, scrubDeep } from "./redact.js";
import { STATUS_PAGE_SCRIPT } from "./status-assets/page-script.js";
import { STATUS_PAGE_STYLE } from "./status-assets/page-style.js";
import type { InterceptStatus } from "./status-intercept.js";
import {
  renderStatusFragment,
  renderStatusPage,
  STATUS_PAGE_CSP,
  STATUS_SCRIPT_PATH,
  STATUS_STYLE_PATH,
} from "./status-page.js";
import { parseStatusQuery } from "./status-query.js";
import {
  buildStatusReport,
  buildUpstreamDetail,
  createDisplayCache,
  type LastReload,
  type StatusReport,
  type UpstreamDetail,
  type UpstreamSnapshot,
} from "./status-report.js";

const IMMUTABLE = "public, max-age=31536000, immutable";

/** Rows on one page of the HTML list (the JSON's default is DEFAULT_LIMIT). */
const PAGE_ROWS = 50;

export interface StatusRoutesDeps {
  /** Every upstream's config, token status and mode, in config order. */
  snapshot(): UpstreamSnapshot[];
  /** The readiness policy now (a reload may change it): admin-probes.ts' `readinessNow`. */
  readinessNow(): ReadinessConfig;
  /** Other readiness conditions (e.g. sustained overload); none by default. */
  readinessConditions?: () => readonly ReadinessCondition[];
  lifecycle: Lifecycle;
  metrics: Metrics;
  scrub: Scrubber;
  version: string;
  startedAtWallMs: number;
  /** Wall clock. */
  now: () => number;
  /** Monotonic clock of the request rates (performance.now). */
  monotonicNow: () => number;
  sharedCacheState?: (() => string) | undefined;
  /** The last configuration reload, if any (shown on /status). */
  lastReload?: (() => LastReload | undefined) | undefined;
  /** Recent refusals by `upstreams[].allow`, newest first. */
  callerDenials?: (() => Denial[]) | undefined;
  /** CONNECT interception (CA and intercepted upstreams); undefined without `intercept`. */
  intercept?: (() => InterceptStatus | undefined) | undefined;
  /** The limits in force now (a reload may change them), for the waiting room's bounds. */
  currentLimits: () => LimitsConfig;
  /** The users file, password check queue and blocked addresses. */
  callersStatus?: (() => CallersStatus | undefined) | undefined;
}

export function registerStatusRoutes(app: FastifyInstance, deps: StatusRoutesDeps): void {
  const { readinessNow } = deps;
  /** The /readyz verdict without building its body (for /status on every refresh). */
  const isReady = (snapshot: readonly UpstreamSnapshot[]): boolean =>
    deps.lifecycle.phase === "running" &&
    (deps.readinessConditions?.() ?? []).every((c) => c.ready) &&
    !snapshot.some((u) =>
      blocksReadiness(readinessNow().requireTokens, u.status.state, u.mode.mode),
    );
  const display = createDisplayCache();

  async function report(request: FastifyRequest, html: boolean): Promise<StatusReport> {
    const query = parseStatusQuery(
      request.query as Record<string, unknown>,
      html ? "problems" : "config",
      html ? PAGE_ROWS : undefined,
    );
    const snapshot = deps.snapshot();
    const raw = await buildStatusReport({
      version: deps.version,
      phase: deps.lifecycle.phase,
      ready: isReady(snapshot),
      readiness: readinessNow(),
      startedAtWallMs: deps.startedAtWallMs,
      nowWallMs: deps.now(),
      nowMs: deps.monotonicNow(),
      upstreams: snapshot,
      metrics: deps.metrics,
      sharedCacheState: deps.sharedCacheState?.(),
      lastReload: deps.lastReload?.(),
      callerDenials: deps.callerDenials?.(),
      intercept: deps.intercept?.(),
      waiting: waitingStatus(deps.lifecycle.waiting.state(), deps.currentLimits()),
      callers: deps.callersStatus?.(),
      query,
      display,
    });
    return scrubDeep(raw, deps.scrub);
  }

  /** The detail of `?upstream=` when it names one; undefined otherwise. */
  async function detailOf(name: unknown): Promise<UpstreamDetail | undefined> {
    if (typeof name !== "string" || name === "") return undefined;
    const snapshot = deps.snapshot().find((s) => s.config.name === name);
    if (!snapshot) return undefined;
    const detail = await buildUpstreamDetail(
      {
        nowWallMs: deps.now(),
        nowMs: deps.monotonicNow(),
        metrics: deps.metrics,
        sharedCacheState: deps.sharedCacheState?.(),
        display,
      },
      snapshot,
    );
    return scrubDeep(detail, deps.scrub);
  }

  app.get("/status", async (request, reply) => {
    reply.header("vary", "accept");
    if (!wantsHtml(request)) return reply.send(await report(request, false));
    const [body, detail] = await Promise.all([
      report(request, true),
      detailOf((request.query as Record<string, unknown>).upstream),
    ]);
    pageHeaders(reply);
    return reply.type("text/html; charset=utf-8").send(renderStatusPage(body, detail));
  });

  // What the page's script swaps in every few seconds: everything below the search form.
  app.get("/status/fragment", async (request, reply) => {
    const [body, detail] = await Promise.all([
      report(request, true),
      detailOf((request.query as Record<string, unknown>).upstream),
    ]);
    pageHeaders(reply);
    return reply.type("text/html; charset=utf-8").send(renderStatusFragment(body, detail));
  });

  // One upstream: the page with its detail open for a browser (a link to share), the JSON for
  // API clients (no Accept, */*, application/json) exactly as before.
  app.get("/status/upstreams/:name", async (request, reply) => {
    reply.header("vary", "accept");
    const name = (request.params as { name?: unknown }).name;
    if (wantsHtml(request)) {
      const [body, detail] = await Promise.all([report(request, true), detailOf(name)]);
      pageHeaders(reply);
      return reply
        .code(detail ? 200 : 404)
        .type("text/html; charset=utf-8")
        .send(
          renderStatusPage(
            body,
            detail,
            detail ? undefined : `No upstream is named ${JSON.stringify(String(name))}.`,
          ),
        );
    }
    const detail = await detailOf(name);
    if (!detail) {
      return reply.code(404).send({
        error: { code: "not_found", message: "no upstream of that name" },
      });
    }
    return reply.send(detail);
  });

  // Named by content hash (status-page.ts): cacheable for good.
  app.get(STATUS_SCRIPT_PATH, async (_request, reply) =>
    reply
      .header("cache-control", IMMUTABLE)
      .type("text/javascript; charset=utf-8")
      .send(STATUS_PAGE_SCRIPT),
  );
  app.get(STATUS_STYLE_PATH, async (_request, reply) =>
    reply
      .header("cache-control", IMMUTABLE)
      .type("text/css; charset=utf-8")
      .send(STATUS_PAGE_STYLE),
  );
}

function pageHeaders(reply: FastifyReply): void {
  reply.header("content-security-policy", STATUS_PAGE_CSP);
  reply.header("x-frame-options", "DENY");
  reply.header("referrer-policy", "no-referrer");
}

/** HTML when the client asks for it (browsers), JSON otherwise (curl sends `*` / `*`). */
function wantsHtml(request: FastifyRequest): boolean {
  const format = (request.query as Record<string, unknown> | undefined)?.format;
  if (format === "html") return true;
  if (format === "json") return false;
  const accept = request.headers.accept ?? "";
  return /\btext\/html\b/i.test(accept);
}
