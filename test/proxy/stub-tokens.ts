import { createHash } from "node:crypto";
import { BearerProxyError } from "../../src/errors.js";
import type { AccessToken, TokenProvider, TokenStatus } from "../../src/token/token-provider.js";

/**
 * A TokenProvider with no token endpoint behind it: tokens `<prefix>-1`, `<prefix>-2`, … A new
 * one is "fetched" on first use and after each accepted invalidate; `failWith` makes fetches
 * reject. Counters let tests assert "exactly one new token".
 */
export interface StubTokens extends TokenProvider {
  fetches: number;
  invalidations: number;
  /** Make the next fetches fail with this error (undefined: succeed again). */
  failWith(err: BearerProxyError | undefined): void;
  /** Make peekToken return nothing, forcing the async path. */
  coldPeek: boolean;
  /** Refuse invalidations (like a token younger than minAgeBeforeInvalidate). */
  refuseInvalidate: boolean;
}

export function tokenUnavailable(retryAfterSeconds = 7): BearerProxyError {
  return new BearerProxyError(
    "BP_ERR_TOKEN_HTTP",
    "token endpoint for upstream stub answered 500",
    {
      upstream: "stub",
      retryAfterSeconds,
    },
  );
}

export function tokenRejected(): BearerProxyError {
  return new BearerProxyError(
    "BP_ERR_TOKEN_REJECTED",
    "token endpoint rejected the client (invalid_client)",
    {
      upstream: "stub",
    },
  );
}

export function createStubTokens(prefix = "stub-token"): StubTokens {
  let current: AccessToken | undefined;
  let failure: BearerProxyError | undefined;
  const make = (n: number): AccessToken => {
    const value = `${prefix}-${n}`;
    return {
      value,
      fingerprint: createHash("sha256").update(value).digest("hex").slice(0, 8),
      scope: undefined,
      obtainedAtMs: 0,
      expiresAtMs: Number.MAX_SAFE_INTEGER,
      expiresAtWallMs: Number.MAX_SAFE_INTEGER,
      lifetimeMs: 600_000,
    };
  };
  const stub: StubTokens = {
    fetches: 0,
    invalidations: 0,
    coldPeek: false,
    refuseInvalidate: false,
    failWith(err) {
      failure = err;
    },
    async getToken() {
      if (failure) throw failure;
      if (!current) {
        stub.fetches++;
        current = make(stub.fetches);
      }
      return current;
    },
    peekToken: () => (stub.coldPeek ? undefined : current),
    invalidate(token) {
      if (stub.refuseInvalidate || current?.value !== token.value) return false;
      stub.invalidations++;
      current = undefined;
      return true;
    },
    start() {},
    status: (): TokenStatus => ({
      state: current ? "valid" : "idle",
      fingerprint: current?.fingerprint,
      scope: undefined,
      expiresAtWallMs: undefined,
      lastFetchAtWallMs: undefined,
      lastFetchDurationMs: undefined,
      lastError: undefined,
      nextRefreshAtWallMs: undefined,
      fetchCount: stub.fetches,
      failureCount: 0,
    }),
    close() {},
  };
  return stub;
}
