/**
 * The /readyz decision. Ready means: running (not starting, draining or stopped), every
 * condition holds, and every upstream the policy requires can authenticate a request now. Which
 * upstreams are required is the config's `readiness.requireTokens` (all, prefetched or none; see
 * config/readiness-defaults.ts for the defaults per shape). A failing token endpoint can make the
 * proxy unready, never unlive: a restart would not fix the IdP.
 *
 * The body is bounded: up to READYZ_LIST_LIMIT upstreams are all listed; beyond, only those
 * not ready (required ones first), with a count of the rest, and a summary by state.
 */
import type { RequireTokens } from "../config/types.js";
import type { LifecyclePhase } from "../lifecycle.js";
import type { TokenState, TokenStatus } from "../token/types.js";

/** Upstreams listed in full up to this many; beyond, only the not-ready ones, this many at most. */
export const READYZ_LIST_LIMIT = 50;

/** One upstream's line in the /readyz body. */
export interface UpstreamReadiness {
  name: string;
  /** It can authenticate requests now (or will on first use, for a lazy one). */
  ready: boolean;
  /** Present (false) only when the policy does not wait for this upstream. */
  required?: false;
  state: TokenState;
  /** Why the upstream is (not) ready, in plain words. */
  reason: string;
  /** The token engine's last failure, when there is one (secret-free by contract). */
  lastError?: { code: string; message: string };
}

/**
 * Anything besides tokens that can hold the proxy out of rotation (e.g. sustained overload).
 * Evaluated by its owner; /readyz lists the ones that do not hold.
 */
export interface ReadinessCondition {
  name: string;
  ready: boolean;
  reason: string;
}

export interface ReadinessSummary {
  upstreams: number;
  ready: number;
  notReady: number;
  /** Not ready and required by the policy: these make the proxy unready. */
  blocking: number;
  /** Upstreams per token state (states with none are left out). */
  byState: Partial<Record<TokenState, number>>;
}

export interface Readiness {
  ready: boolean;
  statusCode: 200 | 503;
  body:
    | {
        status: "ready" | "not_ready" | "starting";
        requireTokens: RequireTokens;
        summary: ReadinessSummary;
        /** Every upstream (small configs), or only the not-ready ones (bounded). */
        upstreams: UpstreamReadiness[];
        /** Not-ready upstreams left out of `upstreams` by the bound. */
        omitted?: number;
        /** Conditions that do not hold. */
        conditions?: ReadinessCondition[];
      }
    | { status: "draining" | "stopped" };
}

export interface ReadinessInput {
  phase: LifecyclePhase;
  requireTokens: RequireTokens;
  upstreams: readonly { name: string; mode: "prefetch" | "lazy"; status: TokenStatus }[];
  conditions?: readonly ReadinessCondition[];
}

/** Decide readiness from the lifecycle phase, the conditions and each upstream's token status. */
export function evaluateReadiness(input: ReadinessInput): Readiness {
  if (input.phase === "draining" || input.phase === "stopped") {
    return { ready: false, statusCode: 503, body: { status: input.phase } };
  }
  const assessed = input.upstreams.map((u) => ({
    ...assessUpstream(u.name, u.mode === "prefetch", u.status),
    ...(isRequired(input.requireTokens, u.mode) ? {} : { required: false as const }),
  }));
  const summary = summarize(assessed);
  const failing = (input.conditions ?? []).filter((c) => !c.ready);
  const listed = boundedList(assessed, summary.notReady);
  const body = {
    requireTokens: input.requireTokens,
    summary,
    upstreams: listed,
    ...(listed.length < assessed.length && listed.length < summary.notReady
      ? { omitted: summary.notReady - listed.length }
      : {}),
    ...(failing.length > 0 ? { conditions: failing } : {}),
  };
  if (input.phase === "starting") {
    return { ready: false, statusCode: 503, body: { status: "starting", ...body } };
  }
  const ready = summary.blocking === 0 && failing.length === 0;
  return {
    ready,
    statusCode: ready ? 200 : 503,
    body: { status: ready ? "ready" : "not_ready", ...body },
  };
}

function isRequired(policy: RequireTokens, mode: "prefetch" | "lazy"): boolean {
  if (policy === "all") return true;
  if (policy === "prefetched") return mode === "prefetch";
  return false;
}

function summarize(assessed: readonly UpstreamReadiness[]): ReadinessSummary {
  const byState: Partial<Record<TokenState, number>> = {};
  let ready = 0;
  let blocking = 0;
  for (const u of assessed) {
    byState[u.state] = (byState[u.state] ?? 0) + 1;
    if (u.ready) ready++;
    else if (u.required !== false) blocking++;
  }
  return {
    upstreams: assessed.length,
    ready,
    notReady: assessed.length - ready,
    blocking,
    byState,
  };
}

/** All of a small config; of a large one the not-ready upstreams, required first, bounded. */
function boundedList(assessed: UpstreamReadiness[], notReady: number): UpstreamReadiness[] {
  if (assessed.length <= READYZ_LIST_LIMIT) return assessed;
  if (notReady === 0) return [];
  const blocking = assessed.filter((u) => !u.ready && u.required !== false);
  const others = assessed.filter((u) => !u.ready && u.required === false);
  return [...blocking, ...others].slice(0, READYZ_LIST_LIMIT);
}

function assessUpstream(name: string, prefetch: boolean, status: TokenStatus): UpstreamReadiness {
  const base = { name, state: status.state };
  const withError = status.lastError
    ? { lastError: { code: status.lastError.code, message: status.lastError.message } }
    : {};
  switch (status.state) {
    case "valid":
      return { ...base, ready: true, reason: "token valid" };
    case "degraded":
      return { ...base, ready: true, reason: "token valid, refresh failing", ...withError };
    case "idle":
      // Lazy upstreams fetch on first use: requests will simply wait for that fetch, so an unused
      // upstream must not hold the whole pod out of service.
      return {
        ...base,
        ready: true,
        reason: "lazy: no token fetched yet, fetched on first request",
      };
    case "fetching":
      if (!prefetch) {
        return { ...base, ready: true, reason: "lazy: first token fetch in progress" };
      }
      return { ...base, ready: false, reason: "first token fetch in progress", ...withError };
    case "failed":
      return {
        ...base,
        ready: false,
        reason: "no usable token: token fetch failing",
        ...withError,
      };
    case "closed":
      return { ...base, ready: false, reason: "token source closed" };
  }
}
