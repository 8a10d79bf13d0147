/**
 * An old in-house server (pre-RFC drafts, early Spring Security OAuth2 style) behind an API
 * gateway: the gateway wants an API key header and answers `{"status":403,"message":…}` without
 * it; the server reads Basic credentials without form-decoding them, answers success as
 * `text/plain` form fields (`access_token=…&token_type=bearer&expires_in=3600`), and failures as
 * a servlet container's HTML error page.
 */
import { authenticate, type IdpProfile, json, text } from "../support/idp-kit.js";

const TOKEN = "5f0e2d1c-legacy-9b8a7c6d5e4f3a2b1c0d";
/** A second client whose secret form encoding changes: only raw Basic (basicEncoding: raw) works. */
export const SPECIAL_CLIENT = { id: "legacy-special", secret: "p@ss+word/2019" };

export const inHouseLegacy: IdpProfile = {
  provider: "Old in-house server (form-encoded answers)",
  tokenPath: "/oauth/token",
  client: { id: "legacy-tool", secret: "Legacy2019Secret" },
  settings: { clientAuth: "basic", tokenHeaders: { "x-api-key": "gw-key-0001" } },
  handle(request) {
    if (request.headers["x-api-key"] !== "gw-key-0001") {
      return json(403, { status: 403, message: "Forbidden: missing or invalid API key" });
    }
    const raw = request.basic?.raw;
    const known =
      authenticate(this, request, { methods: ["basic"], basicDecoding: "raw" }) === "ok" ||
      (raw?.id === SPECIAL_CLIENT.id && raw.secret === SPECIAL_CLIENT.secret);
    if (!known || request.fields.get("grant_type") !== "client_credentials") {
      return text(
        401,
        "text/html;charset=ISO-8859-1",
        '<html><head><meta http-equiv="Content-Type" content="text/html;charset=ISO-8859-1"/><title>Error 401 Unauthorized</title></head><body><h2>HTTP ERROR 401</h2><p>Problem accessing /oauth/token. Reason:<pre>    Bad credentials</pre></p><hr/><i><small>Powered by Jetty://</small></i></body></html>',
      );
    }
    return text(
      200,
      "text/plain;charset=UTF-8",
      `access_token=${TOKEN}&token_type=bearer&expires_in=3600`,
    );
  },
  cases: [
    {
      name: "a text/plain form-encoded success body",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3600, scope: undefined },
    },
    {
      name: "without the gateway's API key: {status, message} shown as an excerpt",
      settings: { tokenHeaders: {} },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 403 \(content type application\/json;charset=UTF-8\)/,
        bodyExcerpt: '{"status":403,"message":"Forbidden: missing or invalid API key"}',
      },
    },
    {
      name: "a wrong secret: the HTML error page as text",
      settings: { clientSecret: "Wrong2019Secret" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 401 \(content type text\/html;charset=ISO-8859-1\)/,
        bodyExcerpt:
          "Error 401 Unauthorized HTTP ERROR 401 Problem accessing /oauth/token. Reason: Bad credentials Powered by Jetty://",
      },
    },
    {
      name: "a secret with + and / sent form-encoded: refused, and the hint names basicEncoding: raw",
      settings: { clientId: SPECIAL_CLIENT.id, clientSecret: SPECIAL_CLIENT.secret },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message:
          /answered 401 .*client secret contains characters that clientAuth: basic form-encodes/,
        hint: /if the client secret is right, set upstreams\[\]\.basicEncoding: raw \(or clientAuth: body\)$/,
        bodyExcerpt: /^Error 401 Unauthorized/,
      },
    },
  ],
  endToEnd: true,
};
