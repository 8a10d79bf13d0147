/**
 * Microsoft Entra ID, v2.0 endpoint (`/{tenant}/oauth2/v2.0/token`). Documented: form body;
 * client_secret in the body, or Basic; `scope` required and, for client credentials, the
 * resource's App ID URI followed by `/.default`; errors RFC 6749-shaped with AADSTS codes,
 * trace and correlation ids; secrets contain `~` and `.`.
 */
import {
  aadError,
  aadMissingParameter,
  clientAuth,
  formOnly,
  grant,
  type IdpProfile,
  jwtLike,
  requireField,
  tokenEndpoint,
  wrongSecret,
} from "./profile-kit.js";

const TENANT = "contoso.onmicrosoft.com";
const CLIENT_ID = "6731de76-14a6-49ae-97bc-6eba6914391e";
const TOKEN = jwtLike("entra-v2");

export const entraIdV2: IdpProfile = {
  provider: "Microsoft Entra ID (v2.0 endpoint)",
  tokenPath: `/${TENANT}/oauth2/v2.0/token`,
  client: { id: CLIENT_ID, secret: "Qx8Q~Zq3.fK_pD1vN2~hL-4mR5sT6uV7wX8yZ9a" },
  settings: { scope: "https://graph.microsoft.com/.default" },
  handle: tokenEndpoint(
    formOnly(aadMissingParameter("v2", "grant_type")),
    requireField("scope", aadMissingParameter("v2", "scope")),
    (request) => {
      const scope = request.fields.get("scope")!;
      if (scope.endsWith("/.default")) return undefined;
      return aadError(
        "v2",
        400,
        "invalid_scope",
        `AADSTS1002012: The provided value for scope ${scope} is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).`,
        1002012,
      );
    },
    clientAuth({ methods: ["post", "basic"] }, (outcome) =>
      outcome === "unknown-client"
        ? aadError(
            "v2",
            400,
            "unauthorized_client",
            "AADSTS700016: Application with identifier was not found in the directory 'Contoso'.",
            700016,
          )
        : aadError(
            "v2",
            401,
            "invalid_client",
            `AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '${CLIENT_ID}'.`,
            7000215,
          ),
    ),
    grant({ token_type: "Bearer", expires_in: 3599, ext_expires_in: 3599, access_token: TOKEN }),
  ),
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
    wrongSecret(
      "Zz9Z~wrong.secret-value_0123456789abcdef",
      /answered 401 \(invalid_client: AADSTS7000215: Invalid client secret provided/,
      {
        name: "a wrong secret: invalid_client with the generic hint",
        hint: /check clientId\/clientSecret$/,
      },
    ),
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
