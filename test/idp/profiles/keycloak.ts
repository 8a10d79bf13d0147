/**
 * Keycloak (`/realms/{realm}/protocol/openid-connect/token`). Documented: form body only (a JSON
 * body is `Missing form parameter: grant_type`); client_secret_post or Basic; a wrong secret is
 * 401 `invalid_client`; extra fields (`refresh_expires_in`, `not-before-policy`).
 */
import {
  authenticate,
  type IdpProfile,
  isClientCredentialsForm,
  json,
  jwtLike,
} from "../support/idp-kit.js";

const TOKEN = jwtLike("keycloak");

export const keycloak: IdpProfile = {
  provider: "Keycloak",
  tokenPath: "/realms/acme/protocol/openid-connect/token",
  client: { id: "files-proxy", secret: "kC3pV9xZ2qR7tW1yU5iO8pA4sD6fG0hJ" },
  settings: {},
  handle(request) {
    if (!isClientCredentialsForm(request)) {
      return json(400, {
        error: "invalid_request",
        error_description: "Missing form parameter: grant_type",
      });
    }
    if (authenticate(this, request, { methods: ["post", "basic"] }) !== "ok") {
      return json(401, {
        error: "invalid_client",
        error_description: "Invalid client or Invalid client credentials",
      });
    }
    return json(200, {
      access_token: TOKEN,
      expires_in: 300,
      refresh_expires_in: 0,
      token_type: "Bearer",
      "not-before-policy": 0,
      scope: "profile email",
    });
  },
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
    {
      name: "a wrong secret",
      settings: { clientSecret: "nope" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 401 \(invalid_client: Invalid client or Invalid client credentials\)/,
      },
    },
  ],
};
