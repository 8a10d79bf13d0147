/**
 * Okta custom authorization server (`/oauth2/default/v1/token`). Documented: form body,
 * `Accept: application/json`; the app's one configured method (client_secret_basic here, the
 * default for new service apps); `scope` required unless the server has default scopes.
 */
import {
  clientAuth,
  formOnly,
  grant,
  type IdpProfile,
  json,
  jwtLike,
  oauthError,
  requireField,
  tokenEndpoint,
  wrongSecret,
} from "./profile-kit.js";

const TOKEN = jwtLike("okta");

export const okta: IdpProfile = {
  provider: "Okta",
  tokenPath: "/oauth2/default/v1/token",
  client: { id: "0oa1b2c3d4e5f6g7h8i9", secret: "Okta_Secret-abcdefghijklmnopqrstuvwxyz0123456" },
  settings: { clientAuth: "basic", scope: "files:read" },
  handle: tokenEndpoint(
    (request) =>
      request.headers.accept === "application/json"
        ? undefined
        : json(406, { errorCode: "E0000065", errorSummary: "Invalid accept header" }),
    formOnly(oauthError(400, "invalid_request", "The request must be form-encoded.")),
    clientAuth({ methods: ["basic"] }, (outcome) =>
      oauthError(
        401,
        "invalid_client",
        outcome === "method-not-allowed"
          ? "Client authentication failed. The client is configured for client_secret_basic."
          : "Client authentication failed. Either the client or the client credentials are invalid.",
      ),
    ),
    requireField(
      "scope",
      oauthError(
        400,
        "invalid_scope",
        "The authorization server resource does not have any configured default scopes, 'scope' must be provided.",
      ),
    ),
    grant((request) => ({
      token_type: "Bearer",
      expires_in: 3600,
      access_token: TOKEN,
      scope: request.fields.get("scope"),
    })),
  ),
  cases: [
    {
      name: "client_secret_basic with a scope",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3600, scope: "files:read" },
    },
    {
      name: "no scope",
      settings: { scope: undefined },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message:
          /answered 400 \(invalid_scope: The authorization server resource does not have any configured default scopes/,
      },
    },
    {
      name: "the secret in the body of a Basic-only app",
      settings: { clientAuth: "body" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message:
          /answered 401 \(invalid_client: Client authentication failed. The client is configured for client_secret_basic/,
      },
    },
    wrongSecret(
      "wrong-secret-value",
      /answered 401 \(invalid_client: Client authentication failed. Either/,
      { hint: /check clientId\/clientSecret$/ },
    ),
  ],
  endToEnd: true,
};
