/**
 * Ory Hydra (`/oauth2/token`). Documented: client_secret_basic by default (fosite URL-decodes the
 * credentials), form body; opaque `ory_at_…` tokens, lowercase `"token_type": "bearer"`, an empty
 * `"scope": ""`; long `error_description`s.
 */
import {
  clientAuth,
  formOnly,
  grant,
  type IdpProfile,
  oauthError,
  tokenEndpoint,
} from "./profile-kit.js";

const TOKEN =
  "ory_at_pQ3x9Zk2Lm5Nv8Bc1Xz4Aq7Ws0Ed3Rf6Tg9Yh2Uj5Ik8.Ol1Pq4Rs7Tu0Vw3Xy6Za9Bc2De5Fg8Hi1Jk4";

export const hydra: IdpProfile = {
  provider: "Ory Hydra",
  tokenPath: "/oauth2/token",
  client: { id: "8f1c0d9e-hydra-client", secret: "hydra~secret.With_Tilde" },
  settings: { clientAuth: "basic" },
  handle: tokenEndpoint(
    formOnly(oauthError(400, "invalid_request", "The request is missing a required parameter.")),
    clientAuth({ methods: ["basic"] }, (outcome) => {
      const why =
        outcome === "method-not-allowed"
          ? "The OAuth 2.0 Client supports client authentication method 'client_secret_basic', but method 'client_secret_post' was requested."
          : "The provided client secret did not match.";
      return oauthError(
        401,
        "invalid_client",
        `Client authentication failed (e.g., unknown client, no client authentication included, or unsupported authentication method). ${why}`,
      );
    }),
    grant({ access_token: TOKEN, expires_in: 3599, scope: "", token_type: "bearer" }),
  ),
  cases: [
    {
      name: "client_secret_basic; lowercase bearer and an empty scope",
      expectToken: { accessToken: TOKEN, expiresInSeconds: 3599, scope: undefined },
    },
    {
      name: "client_secret_post on a Basic client",
      settings: { clientAuth: "body" },
      expectError: {
        code: "BP_ERR_TOKEN_REJECTED",
        message: /answered 401 \(invalid_client: Client authentication failed/,
      },
    },
  ],
};
