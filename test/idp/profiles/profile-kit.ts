/**
 * The shapes most provider profiles share, so a profile states only what its provider does: the
 * token endpoint written as the provider's checks in the order it makes them, the error bodies
 * providers answer with (RFC 6749 §5.2, Microsoft's AADSTS ones), and the case every profile
 * has (the right client id with a wrong secret).
 *
 *   handle: tokenEndpoint(
 *     formOnly(oauthError(400, "invalid_request")),
 *     clientAuth({ methods: ["post", "basic"] }, oauthError(400, "invalid_client")),
 *     grant({ access_token: TOKEN, token_type: "Bearer", expires_in: 3600 }),
 *   ),
 */
import {
  type AuthOutcome,
  authenticate,
  type IdpProfile,
  isClientCredentialsForm,
  json,
  type ProfileCase,
  type Reply,
  type SeenRequest,
} from "../support/idp-kit.js";

export {
  type IdpProfile,
  isClient,
  json,
  jwtLike,
  postCredentials,
  type SeenRequest,
  text,
} from "../support/idp-kit.js";

/** One check of a token request: a reply ends the request, undefined hands it to the next check. */
export type Check = (request: SeenRequest, client: IdpProfile["client"]) => Reply | undefined;

/**
 * A profile's `handle`: makes `checks` in order against the profile's client and sends the first
 * reply one of them gives. The last check answers every request that got that far (`grant`).
 */
export function tokenEndpoint(...checks: Check[]): IdpProfile["handle"] {
  return function handle(this: Pick<IdpProfile, "client">, request: SeenRequest): Reply {
    for (const check of checks) {
      const reply = check(request, this.client);
      if (reply) return reply;
    }
    throw new Error("no check answered the token request: end the profile with grant()");
  };
}

/** An RFC 6749 §5.2 error; `error_description` only when the provider sends one. */
export function oauthError(status: number, error: string, description?: string): Reply {
  return json(
    status,
    description === undefined ? { error } : { error, error_description: description },
  );
}

/** Refuse anything but a POSTed form body with grant_type=client_credentials. */
export function formOnly(reply: Reply): Check {
  return (request) => (isClientCredentialsForm(request) ? undefined : reply);
}

/** Refuse a request whose body lacks `field` (AD FS's `resource`, Okta's `scope`, …). */
export function requireField(field: string, reply: Reply): Check {
  return (request) => (request.fields.get(field) === undefined ? reply : undefined);
}

/**
 * Authenticate the client the provider's way (see `authenticate`); `reply` answers every failed
 * outcome, or is given the outcome when the provider words them differently.
 */
export function clientAuth(
  options: Parameters<typeof authenticate>[2],
  reply: Reply | ((outcome: Exclude<AuthOutcome, "ok">) => Reply),
): Check {
  return (request, client) => {
    const outcome = authenticate({ client }, request, options);
    if (outcome === "ok") return undefined;
    return typeof reply === "function" ? reply(outcome) : reply;
  };
}

/** Refuse a requested scope other than `allowed`; asking for none is fine. */
export function scopeWithin(allowed: string, reply: Reply): Check {
  return (request) => {
    const scope = request.fields.get("scope");
    return scope !== undefined && scope !== allowed ? reply : undefined;
  };
}

/** The success answer: a 200 JSON body, built from the request when it echoes something back. */
export function grant(
  body: Record<string, unknown> | ((request: SeenRequest) => Record<string, unknown>),
): Check {
  return (request) => json(200, typeof body === "function" ? body(request) : body);
}

const AAD_TIMESTAMP = "2026-11-23 17:00:00Z";
const AAD_TRACE = {
  v1: { traceId: "7d9e0f1a-2b3c-4d5e-6f70-8192a3b4c5d6", correlationId: undefined },
  v2: {
    traceId: "0b1a5c43-8e09-4a2b-9d2e-3c1f0e5a7b00",
    correlationId: "5f2e4d1c-6b7a-4c3d-8e9f-0a1b2c3d4e5f",
  },
};

/**
 * A Microsoft identity platform error: RFC 6749 fields whose description carries the AADSTS code,
 * trace id and timestamp, plus `error_codes`; the v2.0 endpoint adds a correlation id, the ids
 * as fields of their own and an `error_uri`.
 */
export function aadError(
  endpoint: "v1" | "v2",
  status: number,
  error: string,
  description: string,
  code: number,
): Reply {
  const { traceId, correlationId } = AAD_TRACE[endpoint];
  const ids = `Trace ID: ${traceId}\r\n${correlationId ? `Correlation ID: ${correlationId}\r\n` : ""}`;
  return json(status, {
    error,
    error_description: `${description}\r\n${ids}Timestamp: ${AAD_TIMESTAMP}`,
    error_codes: [code],
    timestamp: AAD_TIMESTAMP,
    ...(correlationId
      ? {
          trace_id: traceId,
          correlation_id: correlationId,
          error_uri: `https://login.microsoftonline.com/error?code=${code}`,
        }
      : {}),
  });
}

/** AADSTS900144, a required body parameter missing (both endpoints word it alike). */
export function aadMissingParameter(endpoint: "v1" | "v2", parameter: string): Reply {
  return aadError(
    endpoint,
    400,
    "invalid_request",
    `AADSTS900144: The request body must contain the following parameter: '${parameter}'.`,
    900144,
  );
}

/**
 * The case every profile has: the right client id with a wrong `secret`, refused as a client
 * credentials problem (BP_ERR_TOKEN_REJECTED) with `message`; `more` names it more precisely or
 * expects a hint or body excerpt too.
 */
export function wrongSecret(
  secret: string,
  message: RegExp,
  more: { name?: string; hint?: RegExp; bodyExcerpt?: string | RegExp } = {},
): ProfileCase {
  const { name = "a wrong secret", ...details } = more;
  return {
    name,
    settings: { clientSecret: secret },
    expectError: { code: "BP_ERR_TOKEN_REJECTED", message, ...details },
  };
}
