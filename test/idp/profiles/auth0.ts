/**
 * Auth0 (`/oauth/token`). Documented: JSON or form body; client_secret_post (default) or Basic;
 * `audience` required unless the tenant has a default; a wrong secret is
 * `401 {"error":"access_denied","error_description":"Unauthorized"}`.
 */
import {
  authenticate,
  type IdpProfile,
  json,
  jwtLike,
  type SeenRequest,
} from "../support/idp-kit.js";

const TOKEN = jwtLike("auth0");

function isTokenRequest(request: SeenRequest): boolean {
  return (
    (request.mediaType === "application/json" ||
      request.mediaType === "application/x-www-form-urlencoded") &&
    request.fields.get("grant_type") === "client_credentials"
  );
}

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
  handle(request) {
    if (!isTokenRequest(request)) {
      return json(400, {
        error: "invalid_request",
        error_description: "Missing required parameter: grant_type",
      });
    }
    if (authenticate(this, request, { methods: ["post", "basic"] }) !== "ok") {
      return json(401, { error: "access_denied", error_description: "Unauthorized" });
    }
    if (request.fields.get("audience") === undefined) {
      return json(403, {
        error: "access_denied",
        error_description:
          "No audience parameter was provided, and no default audience has been configured",
      });
    }
    return json(200, {
      access_token: TOKEN,
      scope: "read:files",
      expires_in: 86400,
      token_type: "Bearer",
    });
  },
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
    {
      name: "a wrong secret: 401 access_denied still gets the credentials hint",
      settings: { clientSecret: "wrong" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message:
          /answered 401 \(access_denied: Unauthorized\); the token endpoint rejected the client credentials/,
        hint: /check clientId\/clientSecret$/,
      },
    },
  ],
};
