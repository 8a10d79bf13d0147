/**
 * AD FS 2016+ (`/adfs/oauth2/token`). Documented: form body; client_secret_post or
 * client_secret_basic; `resource` (the relying party identifier) required; lowercase
 * `"token_type": "bearer"` and `expires_in` as a string; MSIS-coded RFC 6749 errors.
 */
import {
  clientAuth,
  formOnly,
  grant,
  type IdpProfile,
  jwtLike,
  oauthError,
  requireField,
  tokenEndpoint,
  wrongSecret,
} from "./profile-kit.js";

const TOKEN = jwtLike("adfs");

export const adfs: IdpProfile = {
  provider: "AD FS (2016 and later)",
  tokenPath: "/adfs/oauth2/token",
  client: { id: "b8a1f2e3-adfs-4c5d-9e0f-112233445566", secret: "AdfsGenerated_Secret-7Kq9" },
  settings: { tokenParams: { resource: "urn:contoso:files-api" } },
  handle: tokenEndpoint(
    formOnly(
      oauthError(
        400,
        "invalid_request",
        "MSIS9611: The authorization server received invalid client credentials.",
      ),
    ),
    requireField(
      "resource",
      oauthError(
        400,
        "invalid_resource",
        "MSIS9602: The received 'resource' parameter is not a valid URI.",
      ),
    ),
    clientAuth(
      { methods: ["post", "basic"] },
      oauthError(
        401,
        "invalid_client",
        "MSIS9623: The OAuth client is not authorized to access the token endpoint, or its credentials are invalid.",
      ),
    ),
    grant({ access_token: TOKEN, token_type: "bearer", expires_in: "3600" }),
  ),
  cases: [
    {
      name: "client_secret_post: lowercase bearer and a string expires_in",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3600 },
    },
    {
      name: "client_secret_basic",
      settings: { clientAuth: "basic" },
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3600 },
    },
    {
      name: "no resource: MSIS9602 (a non-RFC error code, so an excerpt comes with it)",
      settings: { tokenParams: {} },
      expectError: {
        code: "BP_ERR_TOKEN_HTTP",
        message: /answered 400 \(invalid_resource: MSIS9602/,
        bodyExcerpt: /^\{"error":"invalid_resource","error_description":"MSIS9602/,
      },
    },
    wrongSecret("not-the-secret", /answered 401 \(invalid_client: MSIS9623/),
  ],
};
