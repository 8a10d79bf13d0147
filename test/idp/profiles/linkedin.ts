/**
 * LinkedIn-style token endpoint (`/oauth/v2/accessToken`). Documented: form body, client_id and
 * client_secret in the body; the answer has no `token_type` (and a 60-day `expires_in`).
 */
import {
  type IdpProfile,
  isClient,
  isClientCredentialsForm,
  json,
  postCredentials,
} from "../support/idp-kit.js";

const TOKEN = "AQV8hJ2kL4mN6pQ8rS0tU2vW4xY6zA8bC0dE2fG4hI6jK8lM0nO2pQ4rS6tU8vW0xY2z";

export const linkedin: IdpProfile = {
  provider: "LinkedIn-style (no token_type)",
  tokenPath: "/oauth/v2/accessToken",
  client: { id: "86abcdefgh1234", secret: "WPL_AP1.abcdEFGHijkl.Mn0pQ==" },
  settings: {},
  handle(request) {
    if (!isClientCredentialsForm(request)) {
      return json(400, {
        error: "invalid_request",
        error_description: 'A required parameter "grant_type" is missing',
      });
    }
    if (!isClient(this, postCredentials(request))) {
      return json(401, {
        error: "invalid_client",
        error_description: "Client authentication failed",
      });
    }
    return json(200, { access_token: TOKEN, expires_in: 5183999 });
  },
  cases: [
    {
      name: "no token_type: taken as Bearer with a warning; 60 days clamped to 24 h",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 86400, notes: ["token_type_missing"] },
    },
    {
      name: "a wrong secret",
      settings: { clientSecret: "wrong" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 401 \(invalid_client: Client authentication failed\)/,
      },
    },
  ],
  endToEnd: true,
};
