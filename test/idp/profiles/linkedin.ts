/**
 * LinkedIn-style token endpoint (`/oauth/v2/accessToken`). Documented: form body, client_id and
 * client_secret in the body; the answer has no `token_type` (and a 60-day `expires_in`).
 */
import {
  formOnly,
  grant,
  type IdpProfile,
  isClient,
  oauthError,
  postCredentials,
  tokenEndpoint,
  wrongSecret,
} from "./profile-kit.js";

const TOKEN = "AQV8hJ2kL4mN6pQ8rS0tU2vW4xY6zA8bC0dE2fG4hI6jK8lM0nO2pQ4rS6tU8vW0xY2z";

export const linkedin: IdpProfile = {
  provider: "LinkedIn-style (no token_type)",
  tokenPath: "/oauth/v2/accessToken",
  client: { id: "86abcdefgh1234", secret: "WPL_AP1.abcdEFGHijkl.Mn0pQ==" },
  settings: {},
  handle: tokenEndpoint(
    formOnly(oauthError(400, "invalid_request", 'A required parameter "grant_type" is missing')),
    // The body's credentials only: a Basic header is not looked at.
    (request, client) =>
      isClient({ client }, postCredentials(request))
        ? undefined
        : oauthError(401, "invalid_client", "Client authentication failed"),
    grant({ access_token: TOKEN, expires_in: 5183999 }),
  ),
  cases: [
    {
      name: "no token_type: taken as Bearer with a warning; 60 days clamped to 24 h",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 86400, notes: ["token_type_missing"] },
    },
    wrongSecret("wrong", /answered 401 \(invalid_client: Client authentication failed\)/),
  ],
  endToEnd: true,
};
