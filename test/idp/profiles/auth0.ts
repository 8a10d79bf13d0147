/**
 * Auth0 (`/oauth/token`). Documented: JSON or form body; client_secret_post (default) or Basic;
 * `audience` required unless the tenant has a default; a wrong secret is
 * `401 {"error":"access_denied","error_description":"Unauthorized"}`.
 */
import {
  type Check,
  clientAuth,
  grant,
  type IdpProfile,
  jwtLike,
  oauthError,
  requireField,
  tokenEndpoint,
  wrongSecret,
} from "./profile-kit.js";

const TOKEN = jwtLike("auth0");

/** A JSON or form body with grant_type=client_credentials. */
const jsonOrForm: Check = (request) =>
  (request.mediaType === "application/json" ||
    request.mediaType === "application/x-www-form-urlencoded") &&
  request.fields.get("grant_type") === "client_credentials"
    ? undefined
    : oauthError(400, "invalid_request", "Missing required parameter: grant_type");

export const auth0: IdpProfile = {
  provider: "Auth0",
  tokenPath: "/oauth/token",
  client: {
    id: "xQ3mZ8vN1pR4tY7wB0cE5fH2jK6lL9aS",
    secret: "Auth0-Secret_9f8e7d6c5b4a3928171605f4e3d2c1b0a9f8e7d6c5b4a392",
  },
  settings: {
    tokenRequestFormat: "json",
    tokenParams: { audience: "https://files.example.com/api" },
  },
  handle: tokenEndpoint(
    jsonOrForm,
    clientAuth({ methods: ["post", "basic"] }, oauthError(401, "access_denied", "Unauthorized")),
    requireField(
      "audience",
      oauthError(
        403,
        "access_denied",
        "No audience parameter was provided, and no default audience has been configured",
      ),
    ),
    grant({ access_token: TOKEN, scope: "read:files", expires_in: 86400, token_type: "Bearer" }),
  ),
  cases: [
    {
      name: "JSON body with an audience",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 86400, scope: "read:files" },
    },
    {
      name: "form body works too",
      settings: { tokenRequestFormat: "form" },
      expectToken: { accessToken: TOKEN, expiresInSeconds: 86400 },
    },
    {
      name: "no audience",
      settings: { tokenParams: {} },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 403 \(access_denied: No audience parameter was provided/,
      },
    },
    wrongSecret(
      "wrong",
      /answered 401 \(access_denied: Unauthorized\); the token endpoint rejected the client credentials/,
      {
        name: "a wrong secret: 401 access_denied still gets the credentials hint",
        hint: /check clientId\/clientSecret$/,
      },
    ),
  ],
};
