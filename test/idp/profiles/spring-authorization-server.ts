/**
 * Spring Authorization Server (`/oauth2/token`). Documented: client_secret_basic by default,
 * Basic credentials URL-decoded (ClientSecretBasicAuthenticationConverter), form body; a bare
 * `{"error":"invalid_client"}` on 401.
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

const TOKEN = jwtLike("spring-as");

export const springAuthorizationServer: IdpProfile = {
  provider: "Spring Authorization Server",
  tokenPath: "/oauth2/token",
  // A secret with characters form encoding changes: Spring AS decodes them, so `form` works.
  client: { id: "messaging-client", secret: "s3cr+t/with=special&chars" },
  settings: { clientAuth: "basic", scope: "message.read" },
  handle: tokenEndpoint(
    formOnly(oauthError(400, "invalid_request")),
    clientAuth({ methods: ["basic"], basicDecoding: "form" }, oauthError(401, "invalid_client")),
    grant((request) => ({
      access_token: TOKEN,
      scope: request.fields.get("scope") ?? "",
      token_type: "Bearer",
      expires_in: 299,
    })),
  ),
  cases: [
    {
      name: "client_secret_basic, a secret with + / = & form-encoded and decoded",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 299, scope: "message.read" },
    },
    {
      name: "client_secret_post on a Basic-only client",
      settings: { clientAuth: "body" },
      expectError: { code: "BP_ERR_TOKEN_REJECTED", message: /answered 401 \(invalid_client\)/ },
    },
    wrongSecret(
      "wrong+secret/value",
      /answered 401 \(invalid_client\); .*client secret contains characters that clientAuth: basic form-encodes/,
      {
        name: "a wrong secret with special characters: the hint names basicEncoding",
        hint: /set upstreams\[\]\.basicEncoding: raw/,
      },
    ),
  ],
};
