/**
 * The answers a running sidecar's admin port sees almost exclusively: the Kubernetes probes
 * (/livez, /readyz, /startup) and Prometheus' /metrics. Computed here once for both ways in —
 * the plain listener's fast path (admin-listener.ts) and the fastify routes (admin-server.ts) —
 * so the two answer alike byte for byte; with them the state both read (the upstream snapshot,
 * the scrubber, the readiness conditions).
 */
import type { ReadinessConfig, UpstreamConfig } from "../config/proxy-config.js";
import type { Lifecycle } from "../lifecycle.js";
import type { Metrics } from "../observability/metrics.js";
import type { TokenStatus } from "../token/token-provider.js";
import type { TokenMode } from "../token/token-registry.js";
import type { AdminServerDeps } from "./admin-deps.js";
import { evaluateReadiness, type ReadinessCondition } from "./readiness.js";
import { createScrubber, type Scrubber, scrubDeep } from "./redact.js";
import type { UpstreamSnapshot } from "./status-report.js";

/** Headers on every admin answer: live data (nothing cached) that is never sniffed as HTML. */
export const ADMIN_HEADERS = {
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
} as const;

/** What fastify's reply sets for a JSON body. */
const JSON_TYPE = "application/json; charset=utf-8";

export const PROBE_PATHS = ["/livez", "/readyz", "/startup", "/metrics"] as const;
export type ProbePath = (typeof PROBE_PATHS)[number];

/** One probe's answer, its body already serialized (the fast path writes it as is). */
export interface ProbeAnswer {
  statusCode: number;
  contentType: string;
  body: string;
}

/** `body` as a JSON answer, as fastify's reply sends it. */
export function jsonAnswer(statusCode: number, body: unknown): ProbeAnswer {
  return { statusCode, contentType: JSON_TYPE, body: JSON.stringify(body) };
}

export interface AdminProbes {
  answer(path: ProbePath): Promise<ProbeAnswer>;
  /** The upstreams now (a reload swaps the list), in display order. */
  upstreams(): readonly UpstreamConfig[];
  /** Every upstream's config, token status and mode now, in display order. */
  snapshot(): UpstreamSnapshot[];
  /** Removes inline client secrets (of the start's config and the current one) from a text. */
  scrub: Scrubber;
  /** Readiness conditions besides tokens and the lifecycle, sustained overload first. */
  readinessConditions(): ReadinessCondition[];
  /** The readiness policy now (a reload may change it). */
  readinessNow(): ReadinessConfig;
}

export function createAdminProbes(deps: AdminServerDeps): AdminProbes {
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
  const configModes = new Map(
    startConfigs.map((c): [string, TokenMode] => [
      c.name,
      { mode: c.tokenPolicy.prefetch ? "prefetch" : "lazy", decidedBy: "token.prefetch" },
    ]),
  );
  const modeOf = deps.tokenMode ?? ((name: string): TokenMode => configModes.get(name)!);
  const snapshot = (): UpstreamSnapshot[] =>
    upstreamsNow().map((config) => ({
      config,
      status: deps.tokenStatus(config.name),
      mode: modeOf(config.name),
      rateLimitOf: deps.rateLimitStatus,
    }));
  const readinessConditions = (): ReadinessCondition[] => [
    overloadCondition(deps.lifecycle, deps.config.limits.sustainedOverloadMs),
    ...(deps.readinessConditions?.() ?? []),
  ];
  const readinessNow = () => deps.currentReadiness?.() ?? deps.config.readiness;

  const answers: Record<ProbePath, () => ProbeAnswer | Promise<ProbeAnswer>> = {
    "/livez": () => jsonAnswer(200, { status: "ok" }),
    "/startup": () => {
      const started = deps.lifecycle.started;
      return jsonAnswer(started ? 200 : 503, { status: started ? "started" : "starting" });
    },
    "/readyz": () => {
      const result = evaluateReadiness({
        phase: deps.lifecycle.phase,
        requireTokens: readinessNow().requireTokens,
        upstreams: snapshot().map(({ config, status, mode }) => ({
          name: config.name,
          mode: mode.mode,
          status,
        })),
        conditions: readinessConditions(),
      });
      return jsonAnswer(result.statusCode, scrubDeep(result.body, scrub));
    },
    "/metrics": async () => {
      updateExpiryGauge(deps.metrics, snapshot());
      const { registry } = deps.metrics;
      return { statusCode: 200, contentType: registry.contentType, body: await registry.metrics() };
    },
  };

  return {
    answer: async (path) => answers[path](),
    upstreams: upstreamsNow,
    snapshot,
    scrub,
    readinessConditions,
    readinessNow,
  };
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

// Every name must have a config: a mismatch is a wiring bug, so fail when the admin is built.
function resolveUpstreams(deps: AdminServerDeps): UpstreamConfig[] {
  const byName = new Map([...deps.config.upstreams, ...deps.upstreams].map((u) => [u.name, u]));
  return deps.upstreamNames.map((name) => {
    const config = byName.get(name);
    if (!config)
      throw new TypeError(`admin server: no config for upstream ${JSON.stringify(name)}`);
    return config;
  });
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
