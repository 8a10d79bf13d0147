/**
 * When a token may be used and when it gets refreshed. Lifetimes count from when we asked (the
 * server may have issued the token at any moment since), a safety margin keeps us clear of the
 * server's expiry, and the refresh point is drawn at random so replicas do not refresh together.
 */

import { fingerprint } from "../base/fingerprint.js";
import type { TokenPolicy } from "../config/proxy-config.js";
import type { AccessToken } from "./token-provider.js";
import type { TokenResponse } from "./token-response.js";

/** A cached token with what the source needs to manage it. */
export interface CachedToken extends AccessToken {
  /** Version of the credentials it was fetched with (rotation drops it). */
  readonly credentialsVersion: string;
  /** Monotonic ms of the planned background refresh. */
  readonly refreshAtMs: number;
}

/** Safety margin before the server's expiry: 10 s, or 10% of the lifetime if shorter. */
export function expiryMarginMs(lifetimeMs: number): number {
  return Math.min(10_000, lifetimeMs * 0.1);
}

/** Whether `token` may still be sent at monotonic time `nowMs` (before expiry minus the margin). */
export function isUsable(token: AccessToken, nowMs: number): boolean {
  return nowMs < token.expiresAtMs - expiryMarginMs(token.lifetimeMs);
}

export interface PlanInput {
  /** Monotonic ms when the request was sent. */
  startMs: number;
  nowMs: number;
  wallNowMs: number;
  policy: TokenPolicy;
  random: () => number;
  credentialsVersion: string;
}

/** Turn a token response into a cached token with its expiry and refresh point. */
export function planToken(response: TokenResponse, input: PlanInput): CachedToken {
  const { startMs, nowMs, policy } = input;
  const lifetimeMs =
    response.expiresInSeconds === undefined
      ? policy.defaultExpiresInMs
      : response.expiresInSeconds * 1000;
  const expiresAtMs = startMs + lifetimeMs;
  const [minFraction, maxFraction] = policy.refreshWindow;
  const fraction = minFraction + input.random() * (maxFraction - minFraction);
  // Before the margin (a window near 100% would leave requests waiting), but never sooner than
  // the min refresh interval (a 1-second token must not become a tight loop).
  const refreshAtMs = Math.max(
    Math.min(startMs + fraction * lifetimeMs, expiresAtMs - expiryMarginMs(lifetimeMs)),
    startMs + policy.minRefreshIntervalMs,
  );
  return {
    value: response.accessToken,
    fingerprint: fingerprint(response.accessToken),
    scope: response.scope,
    obtainedAtMs: nowMs,
    expiresAtMs,
    expiresAtWallMs: input.wallNowMs + (expiresAtMs - nowMs),
    lifetimeMs,
    credentialsVersion: input.credentialsVersion,
    refreshAtMs,
  };
}
