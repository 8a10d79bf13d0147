/**
 * PingFederate (`/as/token.oauth2`). Documented: form body; client_secret_basic or post; scopes
 * must be a subset of the client's; RFC 6749 errors.
 */
import {
  authenticate,
  type IdpProfile,
  isClientCredentialsForm,
  json,
  jwtLike,
} from "../support/idp-kit.js";

const TOKEN = jwtLike("pingfederate");

export const pingFederate: IdpProfile = {
  provider: "PingFederate",
  tokenPath: "/as/token.oauth2",
  client: { id: "files_proxy_cc", secret: "Ping2Fed3Secret4Value5" },
  settings: { clientAuth: "basic", scope: "files.read" },
  handle(request) {
    if (!isClientCredentialsForm(request)) {
      return json(400, { error: "invalid_request", error_description: "Invalid content type" });
    }
    if (authenticate(this, request, { methods: ["basic", "post"] }) !== "ok") {
      return json(401, {
        error: "invalid_client",
        error_description: "Invalid client or client credentials.",
      });
    }
    const scope = request.fields.get("scope");
    if (scope !== undefined && scope !== "files.read") {
      return json(400, {
        error: "invalid_scope",
        error_description:
          "The requested scope(s) must be blank or a subset of the provided scopes.",
      });
    }
    return json(200, { access_token: TOKEN, token_type: "Bearer", expires_in: 7199 });
  },
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
    {
      name: "a wrong secret",
      settings: { clientSecret: "wrong" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 401 \(invalid_client: Invalid client or client credentials.\)/,
      },
    },
  ],
};
