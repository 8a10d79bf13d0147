/**
 * Duende IdentityServer (`/connect/token`). Documented: form body only (anything else is
 * `invalid_request`), client_secret_post or Basic, scopes must be allowed for the client; bare
 * RFC 6749 errors with 400.
 */
import {
  authenticate,
  type IdpProfile,
  isClientCredentialsForm,
  json,
  jwtLike,
} from "../support/idp-kit.js";

const TOKEN = jwtLike("duende");

export const duende: IdpProfile = {
  provider: "Duende IdentityServer",
  tokenPath: "/connect/token",
  client: { id: "files.proxy", secret: "Duende-Secret-Value-511536EF" },
  settings: { scope: "files.api" },
  handle(request) {
    if (!isClientCredentialsForm(request)) return json(400, { error: "invalid_request" });
    if (authenticate(this, request, { methods: ["post", "basic"] }) !== "ok")
      return json(400, { error: "invalid_client" });
    const scope = request.fields.get("scope");
    if (scope !== undefined && scope !== "files.api") return json(400, { error: "invalid_scope" });
    return json(200, {
      access_token: TOKEN,
      expires_in: 3600,
      token_type: "Bearer",
      scope: "files.api",
    });
  },
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
    {
      name: "a wrong secret",
      settings: { clientSecret: "wrong" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message:
          /answered 400 \(invalid_client\); the token endpoint rejected the client credentials: check clientId\/clientSecret$/,
      },
    },
  ],
};
