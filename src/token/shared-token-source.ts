/**
 * Token sources whose token requests go through the Redis-shared cache (issue 6): a replica asks
 * Redis first and only one replica at a time asks the token endpoint. Everything else (refresh
 * timing, backoff, waiting, rotation) is the ordinary token source's.
 */
import { notSharedReason, sharedCacheSecret } from "./client-auth/shared-cache-secret.js";
import { type ClientCredentials, requestToken } from "./client-credentials.js";
import { sharedCredentialKey } from "./credential-identity.js";
import type { SharedToken, SharedTokenCache } from "./redis-types.js";
import type { TokenResponse } from "./token-response.js";
import { createTokenSource, type TokenSourceOptions } from "./token-source.js";
import type { AccessToken, TokenProvider } from "./types.js";

/**
 * A `createSource` for the token registry whose sources ask `cache` (Redis) before the token
 * endpoint. `wallNow` is the wall clock shared tokens are timed on.
 */
export function createSharedTokenSourceFactory(
  cache: SharedTokenCache,
  wallNow: () => number = Date.now,
): (options: TokenSourceOptions) => TokenProvider {
  const toldNotShared = new Set<string>();
  return (options) => {
    const { spec, policy } = options;
    // Secretless methods without shared key material fetch locally (client-auth/shared-cache-secret.ts).
    const notShared = notSharedReason(spec.clientAuth);
    if (notShared !== undefined) {
      // Once per upstream, not on every re-creation of an evicted source.
      if (!toldNotShared.has(options.upstream)) {
        toldNotShared.add(options.upstream);
        options.logger.warn({ upstream: options.upstream, clientAuth: spec.clientAuth }, notShared);
      }
      return createTokenSource(options);
    }
    const dispatcher = options.dispatcher;
    if (!dispatcher)
      throw new TypeError("a shared token source needs the token endpoint's dispatcher");
    let rejectedFingerprint: string | undefined;

    const fetchFromIdp = async (
      credentials: ClientCredentials,
      signal: AbortSignal,
    ): Promise<SharedToken> => {
      const obtainedAtWallMs = wallNow();
      const response = await requestToken(spec, credentials, {
        dispatcher,
        timeoutMs: policy.requestTimeoutMs,
        signal,
      });
      const lifetimeMs =
        response.expiresInSeconds === undefined
          ? policy.defaultExpiresInMs
          : response.expiresInSeconds * 1000;
      return {
        accessToken: response.accessToken,
        tokenType: "Bearer",
        scope: response.scope,
        obtainedAtWallMs,
        expiresAtWallMs: obtainedAtWallMs + lifetimeMs,
      };
    };

    const fetchToken = async (
      credentials: ClientCredentials,
      signal: AbortSignal,
    ): Promise<TokenResponse> => {
      const rejectFingerprint = rejectedFingerprint;
      rejectedFingerprint = undefined;
      const secret = sharedCacheSecret(spec.clientAuth, credentials);
      // No key material read (an unusable key file): ask the IdP, which reports the problem.
      if (secret === undefined)
        return requestToken(spec, credentials, {
          dispatcher,
          timeoutMs: policy.requestTimeoutMs,
          signal,
        });
      const shared = await cache.getOrFetch({
        credentialKey: sharedCredentialKey(spec, credentials.clientId),
        secret,
        refreshFraction: policy.refreshWindow[0],
        rejectFingerprint,
        fetchFromIdp: () => fetchFromIdp(credentials, signal),
        signal,
      });
      // A token another replica fetched has already lived a while: what's left is its lifetime
      // here, to the millisecond (never rounded up: a token must not outlive the server's expiry).
      const remainingMs = Math.max(0, shared.expiresAtWallMs - wallNow());
      return {
        accessToken: shared.accessToken,
        expiresInSeconds: remainingMs / 1000,
        scope: shared.scope,
        expiresInClamped: false,
      };
    };

    const source = createTokenSource({ ...options, fetchToken });
    return {
      getToken: (signal) => source.getToken(signal),
      peekToken: () => source.peekToken(),
      invalidate(token: AccessToken) {
        const dropped = source.invalidate(token);
        // The next fetch must not pick the rejected token up from Redis again.
        if (dropped) rejectedFingerprint = token.fingerprint;
        return dropped;
      },
      start: () => source.start(),
      status: () => source.status(),
      close: () => source.close(),
    };
  };
}
