/**
 * The one place the upstream credential is written: `Authorization` (`Bearer <token>`, or
 * `DPoP <token>` for a token bound to a DPoP key, RFC 9449 §7.1) and, for DPoP, a fresh proof
 * per attempt (new `jti`, `ath` of the token it carries, the origin's last nonce), so a retry or
 * a 401 replay never resends a proof the upstream may have seen. Every attempt of every request
 * — plain, upgrade, retried, replayed — goes through `inject` (Envoy's `inject()` in
 * `injected_credentials/common/credential.h`). token/ finds the token; this only writes it.
 */

import { isBearerTokenSyntax } from "../base/bearer-token.js";
import type { UpstreamConfig } from "../config/proxy-config.js";
import type { AccessToken } from "../token/token-provider.js";

/** Where the credential goes in a forwarded header list (see routing/forwarded-headers.ts). */
export interface CredentialSlots {
  /** Index of the Authorization value. */
  readonly authorizationIndex: number;
  /** Index of the DPoP proof value, or -1 without `dpop`. */
  readonly dpopIndex: number;
}

/**
 * Why a credential could not be written; the request is answered 500 `internal_error` with this
 * message (secret-free: the cause keeps the details for the log).
 */
export class CredentialError extends Error {
  override readonly name = "CredentialError";
}

/**
 * `Bearer <token>` (or `DPoP <token>`) with exactly one space. Throws if the token holds
 * anything that could break or split the header (the token engine already refuses those; this
 * is the last line).
 */
export function authorizationValue(token: AccessToken): string {
  if (!isBearerTokenSyntax(token.value)) {
    throw new Error(`token ${token.fingerprint} contains characters not allowed in a header`);
  }
  return token.dpop ? `DPoP ${token.value}` : `Bearer ${token.value}`;
}

/** One upstream's credential writer: remembers the last Authorization value it built. */
export class CredentialWriter {
  private lastToken: AccessToken | undefined;
  private lastAuthorization = "";

  constructor(private readonly upstream: Pick<UpstreamConfig, "name">) {}

  /**
   * Writes `token` into `headers` at `slots` for one attempt of `method` on `proofUrl` (the
   * upstream URL; the proof's `htu` drops its query, RFC 9449 §4.2). Throws a CredentialError
   * when it can't.
   */
  inject(
    headers: string[],
    slots: CredentialSlots,
    token: AccessToken,
    method: string,
    proofUrl: string,
  ): void {
    if (token !== this.lastToken) {
      // The value changes every few minutes: built once per token, not per request.
      try {
        this.lastAuthorization = authorizationValue(token);
      } catch (err) {
        throw new CredentialError("the token can't be sent in a header", { cause: err });
      }
      this.lastToken = token;
    }
    headers[slots.authorizationIndex] = this.lastAuthorization;
    if (slots.dpopIndex < 0) return;
    const { dpop } = token;
    if (!dpop) {
      throw new CredentialError(
        `no DPoP proof could be signed for upstream ${this.upstream.name}: its token is not bound to a DPoP key`,
      );
    }
    try {
      headers[slots.dpopIndex] = dpop.proofFor(method, proofUrl, token.value);
    } catch (err) {
      throw new CredentialError(
        `no DPoP proof could be signed for upstream ${this.upstream.name}`,
        {
          cause: err,
        },
      );
    }
  }
}
