/**
 * The shape every client-authentication method shares (oauth4webapi `ClientAuth`): given the
 * credentials as read right now, it says what to add to one token request. The request builder
 * (client-credentials.ts) knows nothing about any method; each method knows nothing about the
 * rest of the request.
 */

import type { ClientAuthMethod } from "../../config/proxy-config.js";

export type { ClientAuthMethod };

/** Methods that send a client secret; the others must not be given one. */
export const SECRET_METHODS: readonly ClientAuthMethod[] = ["body", "basic"];

/** The credential as one token request sees it (see secret-reader.ts). */
export interface ClientCredentials {
  clientId: string;
  /** The secret of `body` / `basic`; undefined for the secretless methods. */
  clientSecret?: string | undefined;
  /** PEM text of the private key (`private-key-jwt`), read with the credential, re-read on change. */
  clientKeyPem?: string | undefined;
  /** PEM text of `clientCertificateFile` (`private-key-jwt`, for `x5t#S256`). */
  clientCertificatePem?: string | undefined;
}

/** What a method adds to one token request. */
export interface ClientAuthParts {
  /** Body fields sent after grant_type, in order. */
  fields: [string, string][];
  /** Request headers, lowercase names. */
  headers: Record<string, string>;
  /**
   * Every form in which this request carries something secret (the secret and its encodings, a
   * signed assertion): an IdP echoing one back must not get it into a log line or an error.
   */
  sentSecrets: string[];
  /**
   * Secret-free facts about how the client authenticated, for `bearer-proxy check` and debug
   * logs: key type and algorithm, kid, x5t#S256, the assertion's expiry. Never a key or a JWT.
   */
  facts: string[];
}

/** What a method needs to know about the request being built. */
export interface ClientAuthInput {
  credentials: ClientCredentials;
  /** The token endpoint URL (the default `aud` of a signed assertion). */
  tokenUrl: string;
  /** Wall-clock ms (iat/exp of assertions, expiry checks). */
  nowWallMs: number;
}

/** One method, ready to authenticate token requests. */
export interface ClientAuth {
  readonly method: ClientAuthMethod;
  /** Rejects with a BearerProxyError (BP_ERR_CLIENT_KEY, BP_ERR_CLIENT_ASSERTION, BP_ERR_SECRET_FILE). */
  authenticate(input: ClientAuthInput): Promise<ClientAuthParts>;
}

/** RFC 7521 §4.2: the `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2). */
export const JWT_BEARER_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/**
 * The request parts of a JWT client assertion, signed here (private-key-jwt) or read from a file
 * (client-assertion-file): client_id, the assertion and its type; the assertion is secret.
 */
export function jwtAssertionParts(
  clientId: string,
  assertion: string,
  facts: readonly string[],
): ClientAuthParts {
  return {
    fields: [
      ["client_id", clientId],
      ["client_assertion_type", JWT_BEARER_ASSERTION_TYPE],
      ["client_assertion", assertion],
    ],
    headers: {},
    sentSecrets: [assertion],
    facts: [...facts],
  };
}
