/**
 * The token engine's log lines for fetches (issue 5: one line per token event). A token appears
 * only as its fingerprint; a failure as its code, the IdP's error and the next retry time.
 */
import type { Logger } from "pino";
import type { BearerProxyError } from "../errors.js";
import { CHECK_CREDENTIALS_HINT } from "./credential-hint.js";
import type { AccessToken, TokenOriginStatus } from "./token-provider.js";
import type { TokenResponse } from "./token-response.js";

/**
 * Log a new token: fingerprint, lifetime, scope, when it will be refreshed, and where it came
 * from (`source`): "token fetched" for a token endpoint request, "token taken from the shared
 * cache" for one another replica fetched (with how long ago it was issued). A tolerated
 * departure from RFC 6749 (`response.notes`) is warned about once per source: `notesLogged`
 * holds the codes already warned about.
 */
export function logFetchSuccess(
  log: Logger,
  token: AccessToken,
  fields: {
    response: TokenResponse;
    origin: TokenOriginStatus;
    refreshInMs: number;
    durationMs: number;
    notesLogged?: Set<string>;
  },
): void {
  const lifetimeS = token.lifetimeMs / 1000;
  const { origin } = fields;
  const shared = origin.source === "shared-cache";
  log.info(
    {
      fingerprint: token.fingerprint,
      source: origin.source,
      lifetimeS,
      scope: token.scope,
      refreshInS: round1(fields.refreshInMs / 1000),
      durationMs: Math.round(fields.durationMs),
      ...(shared
        ? { issuedAgoS: round1((origin.receivedAtWallMs - origin.issuedAtWallMs) / 1000) }
        : {}),
    },
    shared ? "token taken from the shared cache" : "token fetched",
  );
  if (fields.response.expiresInClamped) {
    log.warn("token endpoint sent expires_in above 24 h; clamped to 24 h");
  }
  if (fields.response.expiresInSeconds === undefined) {
    log.info(
      { defaultLifetimeS: lifetimeS },
      "token response had no expires_in; assuming the default",
    );
  }
  for (const note of fields.response.notes ?? []) {
    if (fields.notesLogged?.has(note.code)) continue;
    fields.notesLogged?.add(note.code);
    log.warn({ note: note.code }, note.message);
  }
}

/** Log a failed fetch; configuration faults at error level with what to check. */
export function logFetchFailure(
  log: Logger,
  error: BearerProxyError,
  fields: { retryInS: number; servingCachedToken: boolean; failures: number },
): void {
  const details = error.details ?? {};
  const record = {
    code: error.code,
    idpError: details.idpError,
    status: details.status,
    ...fields,
    err: error.message,
    // What a provider that does not answer RFC 6749 errors said, scrubbed (error-excerpt.ts).
    ...(typeof details.bodyExcerpt === "string" ? { bodyExcerpt: details.bodyExcerpt } : {}),
  };
  // The credentials were refused: the hint says what to check (credential-hint.ts).
  const hint =
    typeof details.hint === "string"
      ? details.hint
      : details.idpError === "invalid_client"
        ? CHECK_CREDENTIALS_HINT
        : undefined;
  if (hint !== undefined) {
    // The generic hint names the IdP's own code when it sent one (grep-able: invalid_client).
    const idpError = typeof details.idpError === "string" ? details.idpError : undefined;
    log.error(
      record,
      hint === CHECK_CREDENTIALS_HINT && idpError !== undefined
        ? `the token endpoint rejected the client credentials (${idpError}): check clientId/clientSecret`
        : hint,
    );
  } else if (error.code === "BP_ERR_TOKEN_REJECTED") {
    log.error(
      record,
      "the token endpoint refused the token request: check the upstream's token settings",
    );
  } else {
    log.warn(record, "token refresh failed");
  }
}

/** Seconds with one decimal, for log fields. */
export function round1(value: number): number {
  return Math.round(value * 10) / 10;
}
