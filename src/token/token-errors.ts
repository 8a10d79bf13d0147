/**
 * The errors a token source hands to requests. Messages name the upstream and the token
 * endpoint's own error; never a secret or a token.
 */
import { BearerProxyError, errorMessage } from "../errors.js";

/** Any failure of a fetch as a BearerProxyError (unknown errors count as network errors). */
export function toTokenError(error: unknown, where: string): BearerProxyError {
  if (error instanceof BearerProxyError) return error;
  const message = errorMessage(error);
  return new BearerProxyError(
    "BP_ERR_TOKEN_NETWORK",
    `token request to ${where} failed (${message.slice(0, 200)})`,
    { cause: error },
  );
}

export interface UnavailableInput {
  upstream: string;
  /** Token endpoint as shown in messages. */
  where: string;
  lastError: BearerProxyError | undefined;
  closed: boolean;
  /** Seconds until the next attempt (which already honours the IdP's Retry-After). */
  retryAfterSeconds: number;
  /** Set when the request waited out the bound. */
  waitedMs?: number | undefined;
}

/**
 * Why a request gets no token: 502 token_rejected when the endpoint refused our credentials,
 * otherwise 503 token_unavailable; both with Retry-After.
 */
export function unavailableError(input: UnavailableInput): BearerProxyError {
  const { lastError } = input;
  let reason: string;
  if (input.closed) reason = "the token source is closed";
  else if (lastError) reason = lastError.message;
  else reason = `token endpoint ${input.where} has not answered yet`;
  const waited = input.waitedMs === undefined ? "" : ` within ${input.waitedMs} ms`;
  return new BearerProxyError(
    lastError?.code === "BP_ERR_TOKEN_REJECTED"
      ? "BP_ERR_TOKEN_REJECTED"
      : "BP_ERR_TOKEN_UNAVAILABLE",
    `no token for upstream ${input.upstream}${waited}: ${reason}`,
    {
      upstream: input.upstream,
      retryAfterSeconds: Math.max(1, input.retryAfterSeconds),
      details: { ...lastError?.details, tokenEndpoint: input.where },
      ...(lastError ? { cause: lastError } : {}),
    },
  );
}
