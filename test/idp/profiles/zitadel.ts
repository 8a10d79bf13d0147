/**
 * ZITADEL (`/oauth/v2/token`), service user with a client secret. Documented: Basic credentials,
 * form body, a project-audience scope; opaque tokens; `invalid_client` on a bad secret.
 */
import {
  clientAuth,
  formOnly,
  grant,
  type IdpProfile,
  oauthError,
  tokenEndpoint,
  wrongSecret,
} from "./profile-kit.js";

const TOKEN = "dEnGhIFs3VnqcQU5D2zRSeiarB1nwH6goIKY0J8MWZbsnWcTuu1C59lW9DgCq1y096GYdXA";

export const zitadel: IdpProfile = {
  provider: "ZITADEL",
  tokenPath: "/oauth/v2/token",
  client: { id: "files-service-user", secret: "Zt7kQ2mW9xV4bN6cR1pL8sD3fG5hJ0yT" },
  settings: { clientAuth: "basic", scope: "openid urn:zitadel:iam:org:project:id:zitadel:aud" },
  handle: tokenEndpoint(
    formOnly(oauthError(400, "invalid_request", "grant_type missing")),
    clientAuth(
      { methods: ["basic", "post"] },
      oauthError(400, "invalid_client", "client authentication failed"),
    ),
    grant((request) => ({
      access_token: TOKEN,
      token_type: "Bearer",
      expires_in: 43199,
      scope: request.fields.get("scope") ?? "",
    })),
  ),
  cases: [
    {
      name: "client_secret_basic with the project audience scope",
      expectToken: {
        accessToken: TOKEN,
        expiresInSeconds: 43199,
        scope: "openid urn:zitadel:iam:org:project:id:zitadel:aud",
      },
    },
    wrongSecret("wrong", /answered 400 \(invalid_client: client authentication failed\)/),
  ],
};
