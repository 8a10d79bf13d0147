/**
 * The /readyz decision. Ready means: not shutting down, and every upstream can authenticate a
 * request right now. A failing token endpoint makes the proxy unready (its requests would fail)
 * but never unlive: a restart would not fix the IdP.
 */
import type { LifecyclePhase } from "../lifecycle.js";
import type { TokenState, TokenStatus } from "../token/types.js";

/** One upstream's line in the /readyz body. */
export interface UpstreamReadiness {
  name: string;
  ready: boolean;
  state: TokenState;
  /** Why the upstream is (not) ready, in plain words. */
  reason: string;
  /** The token engine's last failure, when there is one (secret-free by contract). */
  lastError?: { code: string; message: string };
}

export interface Readiness {
  ready: boolean;
  statusCode: 200 | 503;
  body:
    | {
        status: "ready" | "not_ready" | "starting" | "overloaded";
        upstreams: UpstreamReadiness[];
      }
    | { status: "draining" | "stopped" };
}

export interface ReadinessInput {
  phase: LifecyclePhase;
  upstreams: readonly { name: string; prefetch: boolean; status: TokenStatus }[];
  /** Requests have been refused over limits.maxInFlight for limits.sustainedOverload. */
  overloaded?: boolean | undefined;
}

/** Decide readiness from the lifecycle phase and each upstream's token status. */
export function evaluateReadiness(input: ReadinessInput): Readiness {
  if (input.phase === "draining" || input.phase === "stopped") {
    return { ready: false, statusCode: 503, body: { status: input.phase } };
  }
  const upstreams = input.upstreams.map((u) => assessUpstream(u.name, u.prefetch, u.status));
  if (input.phase === "starting") {
    return { ready: false, statusCode: 503, body: { status: "starting", upstreams } };
  }
  if (input.overloaded) {
    // Shed load to other replicas until this one keeps up again (proxy/overload.ts).
    return { ready: false, statusCode: 503, body: { status: "overloaded", upstreams } };
  }
  const ready = upstreams.every((u) => u.ready);
  return {
    ready,
    statusCode: ready ? 200 : 503,
    body: { status: ready ? "ready" : "not_ready", upstreams },
  };
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
