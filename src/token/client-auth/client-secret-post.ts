/** `clientAuth: body`: client_id and client_secret as body fields (RFC 6749 §2.3.1; SPEC.md). */
import { BearerProxyError } from "../../errors.js";
import type { ClientAuth, ClientCredentials } from "./client-auth-types.js";
import { sentSecretForms } from "./secret-forms.js";

export function clientSecretPost(): ClientAuth {
  return {
    method: "body",
    async authenticate({ credentials }) {
      const secret = requireSecret(credentials, "body");
      return {
        fields: [
          ["client_id", credentials.clientId],
          ["client_secret", secret],
        ],
        headers: {},
        sentSecrets: sentSecretForms(credentials),
        facts: [],
      };
    },
  };
}

/** The secret of a secret method; validation guarantees one, a bug must not send "undefined". */
export function requireSecret(credentials: ClientCredentials, method: string): string {
  if (credentials.clientSecret === undefined) {
    throw new BearerProxyError(
      "BP_ERR_CONFIG_INVALID",
      `clientAuth: ${method} needs clientSecret or clientSecretFile`,
    );
  }
  return credentials.clientSecret;
}
