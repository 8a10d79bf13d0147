/**
 * Azure AD v1 endpoint (`/{tenant}/oauth2/token`). Documented: form body, client_id and
 * client_secret in the body, `resource` (not `scope`) required; the success body gives every
 * number as a string (`"expires_in": "3599"`, `expires_on`, `not_before`).
 */
import {
  aadError,
  aadMissingParameter,
  formOnly,
  grant,
  type IdpProfile,
  isClient,
  jwtLike,
  postCredentials,
  requireField,
  tokenEndpoint,
} from "./profile-kit.js";

const TENANT = "contoso.onmicrosoft.com";
const TOKEN = jwtLike("azure-ad-v1");

export const azureAdV1: IdpProfile = {
  provider: "Azure AD v1 endpoint",
  tokenPath: `/${TENANT}/oauth2/token`,
  client: { id: "1f0e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", secret: "v1Secret.Value~42" },
  settings: { tokenParams: { resource: "https://management.azure.com/" } },
  handle: tokenEndpoint(
    formOnly(aadMissingParameter("v1", "grant_type")),
    // The v1 endpoint reads the secret from the body only; Basic is as good as nothing.
    (request) =>
      postCredentials(request)
        ? undefined
        : aadError(
            "v1",
            401,
            "invalid_client",
            "AADSTS7000218: The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
            7000218,
          ),
    requireField("resource", aadMissingParameter("v1", "resource")),
    (request, client) =>
      isClient({ client }, postCredentials(request))
        ? undefined
        : aadError(
            "v1",
            401,
            "invalid_client",
            "AADSTS7000215: Invalid client secret provided.",
            7000215,
          ),
    grant((request) => ({
      token_type: "Bearer",
      expires_in: "3599",
      ext_expires_in: "3599",
      expires_on: "1795000000",
      not_before: "1794996101",
      resource: request.fields.get("resource"),
      access_token: TOKEN,
    })),
  ),
  cases: [
    {
      name: "resource in tokenParams; expires_in as a string is read",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3599, scope: undefined },
    },
    {
      name: "no resource",
      settings: { tokenParams: {} },
      expectError: {
        code: "BP_ERR_TOKEN_HTTP",
        message: /answered 400 \(invalid_request: AADSTS900144: .*'resource'/,
      },
    },
    {
      name: "Basic only: the v1 endpoint wants the secret in the body",
      settings: { clientAuth: "basic" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 401 \(invalid_client: AADSTS7000218/,
        hint: /check clientId\/clientSecret|basicEncoding/,
      },
    },
  ],
  endToEnd: true,
};
