/**
 * Amazon Cognito user pool domain (`/oauth2/token`). Documented: form body; a client with a
 * secret authenticates with Basic; scopes are `resource-server/scope`; errors are bare
 * `{"error":"invalid_client"}` with 400.
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

const TOKEN = jwtLike("cognito");

export const cognito: IdpProfile = {
  provider: "Amazon Cognito",
  tokenPath: "/oauth2/token",
  client: {
    id: "4s1n2k3j4h5g6f7d8s9a0p1o2i",
    secret: "1abc2def3ghi4jkl5mno6pqr7stu8vwx9yz0abc1def2ghi3jk",
  },
  settings: { clientAuth: "basic", scope: "files-api/read" },
  handle: tokenEndpoint(
    formOnly(oauthError(400, "invalid_request")),
    clientAuth({ methods: ["basic"] }, oauthError(400, "invalid_client")),
    scopeWithin("files-api/read", oauthError(400, "invalid_scope")),
    grant({ access_token: TOKEN, expires_in: 3600, token_type: "Bearer" }),
  ),
  cases: [
    {
      name: "client_secret_basic with a resource-server scope",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3600, scope: undefined },
    },
    {
      name: "an unknown scope",
      settings: { scope: "files-api/write" },
      expectError: { code: "BP_ERR_TOKEN_REJECTED", message: /answered 400 \(invalid_scope\)/ },
    },
    wrongSecret(
      "0".repeat(51),
      /answered 400 \(invalid_client\); the token endpoint rejected the client credentials: check clientId\/clientSecret$/,
      { name: "a wrong secret: a bare invalid_client" },
    ),
  ],
};
