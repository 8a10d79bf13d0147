/**
 * The token engine's log lines for fetches (issue 5: one line per token event). A token appears
 * only as its fingerprint; a failure as its code, the IdP's error and the next retry time.
 */
import type { Logger } from "pino";
import type { BearerProxyError } from "../errors.js";
import type { TokenResponse } from "./token-response.js";
import type { AccessToken } from "./types.js";

/** Log a fetched token: fingerprint, lifetime, scope, when it will be refreshed. */
export function logFetchSuccess(
  log: Logger,
  token: AccessToken,
  fields: { response: TokenResponse; refreshInMs: number; durationMs: number },
): void {
  const lifetimeS = token.lifetimeMs / 1000;
  log.info(
    {
      fingerprint: token.fingerprint,
      lifetimeS,
      scope: token.scope,
      refreshInS: round1(fields.refreshInMs / 1000),
      durationMs: Math.round(fields.durationMs),
    },
    "token fetched",
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
}

/** Log a failed fetch; configuration faults at error level with what to check. */
export function logFetchFailure(
  log: Logger,
  error: BearerProxyError,
  fields: { retryInS: number; servingCachedToken: boolean; failures: number },
): void {
  const record = {
    code: error.code,
    idpError: error.details?.idpError,
    status: error.details?.status,
    ...fields,
    err: error.message,
  };
  if (error.details?.idpError === "invalid_client") {
    log.error(
      record,
      "the token endpoint rejected the client credentials (invalid_client): check clientId/clientSecret",
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
