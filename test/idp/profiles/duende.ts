/**
 * Duende IdentityServer (`/connect/token`). Documented: form body only (anything else is
 * `invalid_request`), client_secret_post or Basic, scopes must be allowed for the client; bare
 * RFC 6749 errors with 400.
 */
import {
  clientAuth,
  formOnly,
  grant,
  type IdpProfile,
  jwtLike,
  oauthError,
  scopeWithin,
  tokenEndpoint,
  wrongSecret,
} from "./profile-kit.js";

const TOKEN = jwtLike("duende");

export const duende: IdpProfile = {
  provider: "Duende IdentityServer",
  tokenPath: "/connect/token",
  client: { id: "files.proxy", secret: "Duende-Secret-Value-511536EF" },
  settings: { scope: "files.api" },
  handle: tokenEndpoint(
    formOnly(oauthError(400, "invalid_request")),
    clientAuth({ methods: ["post", "basic"] }, oauthError(400, "invalid_client")),
    scopeWithin("files.api", oauthError(400, "invalid_scope")),
    grant({ access_token: TOKEN, expires_in: 3600, token_type: "Bearer", scope: "files.api" }),
  ),
  cases: [
    {
      name: "client_secret_post with an allowed scope",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3600, scope: "files.api" },
    },
    {
      name: "client_secret_basic",
      settings: { clientAuth: "basic" },
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3600 },
    },
    {
      name: "a JSON body",
      settings: { tokenRequestFormat: "json" },
      expectError: { code: "BP_ERR_TOKEN_HTTP", message: /answered 400 \(invalid_request\)/ },
    },
    {
      name: "a scope not allowed for the client",
      settings: { scope: "admin.api" },
      expectError: { code: "BP_ERR_TOKEN_REJECTED", message: /answered 400 \(invalid_scope\)/ },
    },
    wrongSecret(
      "wrong",
      /answered 400 \(invalid_client\); the token endpoint rejected the client credentials: check clientId\/clientSecret$/,
    ),
  ],
};
