/**
 * Apigee's OAuth v2 proxy (`/oauth/client_credential/accesstoken?grant_type=client_credentials`).
 * Documented: grant_type in the query, the app's key and secret as Basic; the answer says
 * `"token_type": "BearerToken"`, every number is a string, `"scope": ""`; errors are
 * `{"ErrorCode": …, "Error": …}`, not RFC 6749-shaped.
 */
import {
  clientAuth,
  grant,
  type IdpProfile,
  json,
  tokenEndpoint,
  wrongSecret,
} from "./profile-kit.js";

const TOKEN = "pK9n3GAxyzKf2hT8DzYvA1bC5dE7fG9h";
const CLIENT_ID = "Ab3dEf5gHi7jKl9mNo1pQr3sTu5vWx7y";

export const apigee: IdpProfile = {
  provider: "Apigee",
  tokenPath: "/oauth/client_credential/accesstoken?grant_type=client_credentials",
  client: { id: CLIENT_ID, secret: "Zy8xWv6uTs4rQp2o" },
  settings: { clientAuth: "basic", token: { acceptTokenTypes: ["Bearer", "BearerToken"] } },
  handle: tokenEndpoint(
    (request) =>
      request.query.get("grant_type") === "client_credentials"
        ? undefined
        : json(400, { ErrorCode: "invalid_request", Error: "Unsupported grant type : null" }),
    clientAuth(
      { methods: ["basic", "post"] },
      json(401, { ErrorCode: "invalid_client", Error: "ClientId is Invalid" }),
    ),
    grant({
      refresh_token_expires_in: "0",
      api_product_list: "[files-product]",
      api_product_list_json: ["files-product"],
      organization_name: "acme",
      "developer.email": "dev@acme.example",
      token_type: "BearerToken",
      issued_at: "1795000000000",
      client_id: CLIENT_ID,
      access_token: TOKEN,
      application_name: "7c1e6b0a-files-app",
      scope: "",
      expires_in: "1799",
      refresh_count: "0",
      status: "approved",
    }),
  ),
  cases: [
    {
      name: "BearerToken accepted through token.acceptTokenTypes; expires_in as a string",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 1799, scope: undefined },
    },
    {
      name: "without acceptTokenTypes: refused, naming the value and the setting",
      settings: { token: {} },
      expectError: {
        code: "BP_ERR_TOKEN_RESPONSE_INVALID",
        message:
          /token_type is "BearerToken", expected "Bearer"; if it is a bearer token, add "BearerToken" to token.acceptTokenTypes/,
      },
    },
    wrongSecret(
      "Wr0ngSecretValue",
      /answered 401 \(content type application\/json;charset=UTF-8\); the token endpoint rejected the client credentials/,
      {
        name: "a wrong secret: {ErrorCode, Error} shown as a scrubbed excerpt",
        bodyExcerpt: '{"ErrorCode":"invalid_client","Error":"ClientId is Invalid"}',
        hint: /check clientId\/clientSecret$/,
      },
    ),
  ],
  endToEnd: true,
};
