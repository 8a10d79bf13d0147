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
import type { RequireTokens } from "../config/proxy-config.js";
import type { LifecyclePhase } from "../lifecycle.js";
import type { TokenState, TokenStatus } from "../token/token-provider.js";

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
  // One cheap pass for the counts; entries are built only for the upstreams listed.
  const byState: Partial<Record<TokenState, number>> = {};
  let notReady = 0;
  let blocking = 0;
  const blockingIndexes: number[] = [];
  const otherIndexes: number[] = [];
  const { upstreams } = input;
  for (let i = 0; i < upstreams.length; i++) {
    const u = upstreams[i]!;
    const state = u.status.state;
    byState[state] = (byState[state] ?? 0) + 1;
    if (canServe(state, u.mode === "prefetch")) continue;
    notReady++;
    if (isRequired(input.requireTokens, u.mode)) {
      blocking++;
      blockingIndexes.push(i);
    } else {
      otherIndexes.push(i);
    }
  }
  const summary: ReadinessSummary = {
    upstreams: upstreams.length,
    ready: upstreams.length - notReady,
    notReady,
    blocking,
    byState,
  };
  const small = upstreams.length <= READYZ_LIST_LIMIT;
  const listedIndexes = small
    ? upstreams.map((_, i) => i)
    : [...blockingIndexes, ...otherIndexes].slice(0, READYZ_LIST_LIMIT);
  const listed = listedIndexes.map((i) => entryOf(upstreams[i]!, input.requireTokens));
  const failing = (input.conditions ?? []).filter((c) => !c.ready);
  const omitted = small ? 0 : notReady - listed.length;
  const body = {
    requireTokens: input.requireTokens,
    summary,
    upstreams: listed,
    ...(omitted > 0 ? { omitted } : {}),
    ...(failing.length > 0 ? { conditions: failing } : {}),
  };
  if (input.phase === "starting") {
    return { ready: false, statusCode: 503, body: { status: "starting", ...body } };
  }
  const ready = blocking === 0 && failing.length === 0;
  return {
    ready,
    statusCode: ready ? 200 : 503,
    body: { status: ready ? "ready" : "not_ready", ...body },
  };
}

/**
 * Whether this upstream, in this state, holds the proxy out of rotation under `policy`: what
 * /status needs for its `ready` flag on every refresh, without building the /readyz body.
 */
export function blocksReadiness(
  policy: RequireTokens,
  state: TokenState,
  mode: "prefetch" | "lazy",
): boolean {
  return !canServe(state, mode === "prefetch") && isRequired(policy, mode);
}

function entryOf(u: ReadinessInput["upstreams"][number], policy: RequireTokens): UpstreamReadiness {
  const entry = assessUpstream(u.name, u.mode === "prefetch", u.status);
  return isRequired(policy, u.mode) ? entry : { ...entry, required: false };
}

/** The token side of assessUpstream, without building the entry. */
function canServe(state: TokenState, prefetch: boolean): boolean {
  switch (state) {
    case "valid":
    case "degraded":
    case "idle":
      return true;
    case "fetching":
      return !prefetch;
    default:
      return false;
  }
}

function isRequired(policy: RequireTokens, mode: "prefetch" | "lazy"): boolean {
  if (policy === "all") return true;
  if (policy === "prefetched") return mode === "prefetch";
  return false;
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
