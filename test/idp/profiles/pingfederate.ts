/**
 * PingFederate (`/as/token.oauth2`). Documented: form body; client_secret_basic or post; scopes
 * must be a subset of the client's; RFC 6749 errors.
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

const TOKEN = jwtLike("pingfederate");

export const pingFederate: IdpProfile = {
  provider: "PingFederate",
  tokenPath: "/as/token.oauth2",
  client: { id: "files_proxy_cc", secret: "Ping2Fed3Secret4Value5" },
  settings: { clientAuth: "basic", scope: "files.read" },
  handle: tokenEndpoint(
    formOnly(oauthError(400, "invalid_request", "Invalid content type")),
    clientAuth(
      { methods: ["basic", "post"] },
      oauthError(401, "invalid_client", "Invalid client or client credentials."),
    ),
    scopeWithin(
      "files.read",
      oauthError(
        400,
        "invalid_scope",
        "The requested scope(s) must be blank or a subset of the provided scopes.",
      ),
    ),
    grant({ access_token: TOKEN, token_type: "Bearer", expires_in: 7199 }),
  ),
  cases: [
    {
      name: "client_secret_basic with a scope",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 7199 },
    },
    {
      name: "a scope the client does not have",
      settings: { scope: "files.write" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 400 \(invalid_scope: The requested scope\(s\) must be blank/,
      },
    },
    wrongSecret("wrong", /answered 401 \(invalid_client: Invalid client or client credentials.\)/),
  ],
};
