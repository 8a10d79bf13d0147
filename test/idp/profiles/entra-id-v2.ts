/**
 * Microsoft Entra ID, v2.0 endpoint (`/{tenant}/oauth2/v2.0/token`). Documented: form body;
 * client_secret in the body, or Basic; `scope` required and, for client credentials, the
 * resource's App ID URI followed by `/.default`; errors RFC 6749-shaped with AADSTS codes,
 * trace and correlation ids; secrets contain `~` and `.`.
 */
import {
  authenticate,
  type IdpProfile,
  isClientCredentialsForm,
  json,
  jwtLike,
} from "../support/idp-kit.js";

const TENANT = "contoso.onmicrosoft.com";
const CLIENT_ID = "6731de76-14a6-49ae-97bc-6eba6914391e";
const TOKEN = jwtLike("entra-v2");

function aadError(status: number, error: string, description: string, code: number) {
  return json(status, {
    error,
    error_description: `${description}\r\nTrace ID: 0b1a5c43-8e09-4a2b-9d2e-3c1f0e5a7b00\r\nCorrelation ID: 5f2e4d1c-6b7a-4c3d-8e9f-0a1b2c3d4e5f\r\nTimestamp: 2026-11-23 17:00:00Z`,
    error_codes: [code],
    timestamp: "2026-11-23 17:00:00Z",
    trace_id: "0b1a5c43-8e09-4a2b-9d2e-3c1f0e5a7b00",
    correlation_id: "5f2e4d1c-6b7a-4c3d-8e9f-0a1b2c3d4e5f",
    error_uri: `https://login.microsoftonline.com/error?code=${code}`,
  });
}

export const entraIdV2: IdpProfile = {
  provider: "Microsoft Entra ID (v2.0 endpoint)",
  tokenPath: `/${TENANT}/oauth2/v2.0/token`,
  client: { id: CLIENT_ID, secret: "Qx8Q~Zq3.fK_pD1vN2~hL-4mR5sT6uV7wX8yZ9a" },
  settings: { scope: "https://graph.microsoft.com/.default" },
  handle(request) {
    if (!isClientCredentialsForm(request)) {
      return aadError(
        400,
        "invalid_request",
        "AADSTS900144: The request body must contain the following parameter: 'grant_type'.",
        900144,
      );
    }
    const scope = request.fields.get("scope");
    if (scope === undefined) {
      return aadError(
        400,
        "invalid_request",
        "AADSTS900144: The request body must contain the following parameter: 'scope'.",
        900144,
      );
    }
    if (!scope.endsWith("/.default")) {
      return aadError(
        400,
        "invalid_scope",
        `AADSTS1002012: The provided value for scope ${scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).`,
        1002012,
      );
    }
    switch (authenticate(this, request, { methods: ["post", "basic"] })) {
      case "ok":
        return json(200, {
          token_type: "Bearer",
          expires_in: 3599,
          ext_expires_in: 3599,
          access_token: TOKEN,
        });
      case "unknown-client":
        return aadError(
          400,
          "unauthorized_client",
          "AADSTS700016: Application with identifier was not found in the directory 'Contoso'.",
          700016,
        );
      default:
        return aadError(
          401,
          "invalid_client",
          `AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '${CLIENT_ID}'.`,
          7000215,
        );
    }
  },
  cases: [
    {
      name: "client_secret_post with a /.default scope",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3599, scope: undefined },
    },
    {
      name: "client_secret_basic: the secret's ~ and . are form-encoded and Entra decodes them",
      settings: { clientAuth: "basic" },
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3599 },
    },
    {
      name: "a scope without /.default is refused with Entra's own words",
      settings: { scope: "https://graph.microsoft.com/User.Read" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 400 \(invalid_scope: AADSTS1002012: The provided value for scope/,
      },
    },
    {
      name: "no scope at all",
      settings: { scope: undefined },
      expectError: {
        code: "BP_ERR_TOKEN_HTTP",
        message: /answered 400 \(invalid_request: AADSTS900144: .*'scope'/,
      },
    },
    {
      name: "a wrong secret: invalid_client with the generic hint",
      settings: { clientSecret: "Zz9Z~wrong.secret-value_0123456789abcdef" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 401 \(invalid_client: AADSTS7000215: Invalid client secret provided/,
        hint: /check clientId\/clientSecret$/,
      },
    },
    {
      name: "a JSON request body is refused (Entra reads forms only)",
      settings: { tokenRequestFormat: "json" },
      expectError: {
        code: "BP_ERR_TOKEN_HTTP",
        message: /answered 400 \(invalid_request: AADSTS900144: .*'grant_type'/,
      },
    },
  ],
  endToEnd: true,
};
