/**
 * Keycloak (`/realms/{realm}/protocol/openid-connect/token`). Documented: form body only (a JSON
 * body is `Missing form parameter: grant_type`); client_secret_post or Basic; a wrong secret is
 * 401 `invalid_client`; extra fields (`refresh_expires_in`, `not-before-policy`).
 */
import {
  clientAuth,
  formOnly,
  grant,
  type IdpProfile,
  jwtLike,
  oauthError,
  tokenEndpoint,
  wrongSecret,
} from "./profile-kit.js";

const TOKEN = jwtLike("keycloak");

export const keycloak: IdpProfile = {
  provider: "Keycloak",
  tokenPath: "/realms/acme/protocol/openid-connect/token",
  client: { id: "files-proxy", secret: "kC3pV9xZ2qR7tW1yU5iO8pA4sD6fG0hJ" },
  settings: {},
  handle: tokenEndpoint(
    formOnly(oauthError(400, "invalid_request", "Missing form parameter: grant_type")),
    clientAuth(
      { methods: ["post", "basic"] },
      oauthError(401, "invalid_client", "Invalid client or Invalid client credentials"),
    ),
    grant({
      access_token: TOKEN,
      expires_in: 300,
      refresh_expires_in: 0,
      token_type: "Bearer",
      "not-before-policy": 0,
      scope: "profile email",
    }),
  ),
  cases: [
    {
      name: "client_secret_post",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 300, scope: "profile email" },
    },
    {
      name: "client_secret_basic",
      settings: { clientAuth: "basic" },
      expectToken: { accessToken: TOKEN, expiresInSeconds: 300 },
    },
    {
      name: "a JSON body",
      settings: { tokenRequestFormat: "json" },
      expectError: {
        code: "BP_ERR_TOKEN_HTTP",
        message: /answered 400 \(invalid_request: Missing form parameter: grant_type\)/,
      },
    },
    wrongSecret(
      "nope",
      /answered 401 \(invalid_client: Invalid client or Invalid client credentials\)/,
    ),
  ],
};
