/**
 * Token sources whose token requests go through the Redis-shared cache (issue 6): a replica asks
 * Redis first and only one replica at a time asks the token endpoint. Everything else (refresh
 * timing, backoff, waiting, rotation, the DPoP key) is the ordinary token source's.
 *
 * A DPoP-bound token (RFC 9449) is useful only to a holder of its key, so it is shared under the
 * key's thumbprint (part of the Redis key and the AES-GCM associated data): a replica with
 * another `dpop.keyFile` never gets it. An ephemeral key is made per process, so no other
 * replica could use its tokens: they are not shared at all.
 */

import { sharedCredentialKey } from "../config/credential-identity.js";
import type { TokenEndpointSpec } from "../config/proxy-config.js";
import { BearerProxyError } from "../errors.js";
import { notSharedReason, sharedCacheSecret } from "./client-auth/shared-cache-secret.js";
import { type ClientCredentials, requestToken } from "./client-credentials.js";
import type { Dpop } from "./dpop/index.js";
import { describeTokenUrl } from "./response-text.js";
import type { SharedToken, SharedTokenCache } from "./shared-token-cache.js";
import type { TokenProvider } from "./token-provider.js";
import { createTokenSource, type FetchedToken, type TokenSourceOptions } from "./token-source.js";

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
    // Secretless methods without shared key material, and ephemeral DPoP keys, fetch locally.
    const notShared = tokenNotSharedReason(spec);
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
      dpop: Dpop | undefined,
    ): Promise<SharedToken> => {
      const obtainedAtWallMs = wallNow();
      const response = await requestToken(spec, credentials, {
        dispatcher,
        timeoutMs: policy.requestTimeoutMs,
        signal,
        dpop,
      });
      const lifetimeMs =
        response.expiresInSeconds === undefined
          ? policy.defaultExpiresInMs
          : response.expiresInSeconds * 1000;
      return {
        accessToken: response.accessToken,
        tokenType: response.tokenType ?? "Bearer",
        scope: response.scope,
        obtainedAtWallMs,
        expiresAtWallMs: obtainedAtWallMs + lifetimeMs,
      };
    };

    const fetchToken = async (
      credentials: ClientCredentials,
      signal: AbortSignal,
      dpop?: Dpop,
    ): Promise<FetchedToken> => {
      const rejectFingerprint = rejectedFingerprint;
      rejectedFingerprint = undefined;
      const secret = sharedCacheSecret(spec.clientAuth, credentials);
      // No key material read (an unusable key file): ask the IdP, which reports the problem.
      if (secret === undefined)
        return requestToken(spec, credentials, {
          dispatcher,
          timeoutMs: policy.requestTimeoutMs,
          signal,
          dpop,
        });
      // The cache calls fetchFromIdp exactly when this call asks the token endpoint; otherwise
      // the token came from Redis (another replica's request, or a concurrent call's here).
      let askedTokenEndpoint = false;
      const shared = await cache.getOrFetch({
        credentialKey: sharedCredentialKey(spec, credentials.clientId, { dpopJkt: dpop?.jkt }),
        secret,
        refreshFraction: policy.refreshWindow[0],
        rejectFingerprint,
        fetchFromIdp: () => {
          askedTokenEndpoint = true;
          return fetchFromIdp(credentials, signal, dpop);
        },
        signal,
      });
      // Stored under the key's thumbprint, so only a bound token can be found here; checked all
      // the same, as an unbound token would be sent without the protection asked for.
      if (dpop !== undefined && shared.tokenType.toLowerCase() !== "dpop") {
        throw new BearerProxyError(
          "BP_ERR_TOKEN_RESPONSE_INVALID",
          `the shared token cache held a ${JSON.stringify(shared.tokenType.slice(0, 20))} token for ${describeTokenUrl(spec.tokenUrl)}, expected a DPoP-bound one because upstreams[].dpop is set`,
        );
      }
      // A token another replica fetched has already lived a while: what's left is its lifetime
      // here, to the millisecond (never rounded up: a token must not outlive the server's expiry).
      const remainingMs = Math.max(0, shared.expiresAtWallMs - wallNow());
      return {
        accessToken: shared.accessToken,
        expiresInSeconds: remainingMs / 1000,
        scope: shared.scope,
        expiresInClamped: false,
        ...(dpop === undefined ? {} : { tokenType: "DPoP" as const }),
        ...(askedTokenEndpoint ? {} : { sharedCache: { issuedAtWallMs: shared.obtainedAtWallMs } }),
      };
    };

    const source = createTokenSource({ ...options, fetchToken });
    return {
      getToken: (signal, waiter) => source.getToken(signal, waiter),
      peekToken: () => source.peekToken(),
      invalidate(token, waiter) {
        const dropped = source.invalidate(token, waiter);
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

/**
 * Why a credential's tokens are not shared through Redis, or undefined when they are: its client
 * authentication has no key material replicas share (client-auth/shared-cache-secret.ts), or
 * its DPoP key is ephemeral. Logged once per upstream and shown on /status (`tokenNotShared`).
 */
export function tokenNotSharedReason(spec: TokenEndpointSpec): string | undefined {
  const reason = notSharedReason(spec.clientAuth);
  if (reason !== undefined) return reason;
  if (spec.dpop !== undefined && spec.dpop.keyFile === undefined) {
    return "tokens bound to an ephemeral DPoP key are not shared through Redis (the key is made per process, so no other replica could prove possession of it); each replica fetches its own: set dpop.keyFile to one key shared by the replicas to share them";
  }
  return undefined;
}
