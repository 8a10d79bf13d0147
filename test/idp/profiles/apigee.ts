/**
 * Apigee's OAuth v2 proxy (`/oauth/client_credential/accesstoken?grant_type=client_credentials`).
 * Documented: grant_type in the query, the app's key and secret as Basic; the answer says
 * `"token_type": "BearerToken"`, every number is a string, `"scope": ""`; errors are
 * `{"ErrorCode": …, "Error": …}`, not RFC 6749-shaped.
 */
import { authenticate, type IdpProfile, json } from "../support/idp-kit.js";

const TOKEN = "pK9n3GAxyzKf2hT8DzYvA1bC5dE7fG9h";

export const apigee: IdpProfile = {
  provider: "Apigee",
  tokenPath: "/oauth/client_credential/accesstoken?grant_type=client_credentials",
  client: { id: "Ab3dEf5gHi7jKl9mNo1pQr3sTu5vWx7y", secret: "Zy8xWv6uTs4rQp2o" },
  settings: { clientAuth: "basic", token: { acceptTokenTypes: ["Bearer", "BearerToken"] } },
  handle(request) {
    if (request.query.get("grant_type") !== "client_credentials") {
      return json(400, { ErrorCode: "invalid_request", Error: "Unsupported grant type : null" });
    }
    if (authenticate(this, request, { methods: ["basic", "post"] }) !== "ok") {
      return json(401, { ErrorCode: "invalid_client", Error: "ClientId is Invalid" });
    }
    return json(200, {
      refresh_token_expires_in: "0",
      api_product_list: "[files-product]",
      api_product_list_json: ["files-product"],
      organization_name: "acme",
      "developer.email": "dev@acme.example",
      token_type: "BearerToken",
      issued_at: "1795000000000",
      client_id: this.client.id,
      access_token: TOKEN,
      application_name: "7c1e6b0a-files-app",
      scope: "",
      expires_in: "1799",
      refresh_count: "0",
      status: "approved",
    });
  },
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
    {
      name: "a wrong secret: {ErrorCode, Error} shown as a scrubbed excerpt",
      settings: { clientSecret: "Wr0ngSecretValue" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message:
          /answered 401 \(content type application\/json;charset=UTF-8\); the token endpoint rejected the client credentials/,
        bodyExcerpt: '{"ErrorCode":"invalid_client","Error":"ClientId is Invalid"}',
        hint: /check clientId\/clientSecret$/,
      },
    },
  ],
  endToEnd: true,
};
