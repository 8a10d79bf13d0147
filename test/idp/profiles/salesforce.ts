/**
 * Salesforce client credentials flow (`/services/oauth2/token`). Documented: form body,
 * client_id/client_secret in the body or Basic; the token contains `!` (outside RFC 6750's
 * b64token); no `expires_in` at all (the session timeout applies), `issued_at` in ms as a string.
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

const TOKEN =
  "00D5g000004GxyzEAC!AQ4AQFi8dT3eM.Yx0_lS2bUu8q7wJr6vH5sK1nP9aZc3QoR2tW4yX6zB8dE0fG1hI3jK5lM7nO9pQ";

export const salesforce: IdpProfile = {
  provider: "Salesforce",
  tokenPath: "/services/oauth2/token",
  client: {
    id: "3MVG9_connected.app.consumer.key.0123456789",
    secret: "7F3E2D1C0B9A8F7E6D5C4B3A2F1E0D9C8B7A6F5E4D3C2B1A",
  },
  settings: {},
  handle: tokenEndpoint(
    formOnly(oauthError(400, "unsupported_grant_type", "grant type not supported")),
    clientAuth(
      { methods: ["post", "basic"] },
      oauthError(400, "invalid_client", "invalid client credentials"),
    ),
    grant({
      access_token: TOKEN,
      signature: "k0XtN4mH3V0tn3Vl8nYjV4wY1pZ2bQ3cR4dS5eT6fU8=",
      scope: "api",
      instance_url: "https://acme.my.salesforce.com",
      id: "https://login.salesforce.com/id/00D5g000004GxyzEAC/0055g00000AbCdEAAZ",
      token_type: "Bearer",
      issued_at: "1795000000000",
    }),
  ),
  cases: [
    {
      name: "a token with ! and no expires_in (token.defaultExpiresIn applies)",
      expectToken: { accessToken: TOKEN, expiresInSeconds: undefined, scope: "api" },
    },
    wrongSecret("0000", /answered 400 \(invalid_client: invalid client credentials\)/),
  ],
  endToEnd: true,
};
