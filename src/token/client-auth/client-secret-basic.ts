/** `clientAuth: basic`: HTTP Basic with id and secret (RFC 6749 §2.3.1), body without them. */

import { formEncodingChanges } from "../credential-hint.js";
import type { ClientAuth } from "./client-auth-types.js";
import { requireSecret } from "./client-secret-post.js";
import { basicCredentials, sentSecretForms } from "./secret-forms.js";

/** `encoding`: `form` (the RFC) or `raw` (setting `basicEncoding`). */
export function clientSecretBasic(encoding: "form" | "raw"): ClientAuth {
  return {
    method: "basic",
    async authenticate({ credentials }) {
      const secret = requireSecret(credentials, "basic");
      const facts = [
        `HTTP Basic, ${encoding === "form" ? "form-encoded" : "raw (not form-encoded)"}`,
      ];
      if (formEncodingChanges(credentials.clientId) || formEncodingChanges(secret)) {
        facts.push(
          "the client id or secret contains characters that form-encoding changes (basicEncoding form and raw send different credentials)",
        );
      }
      return {
        fields: [],
        headers: {
          authorization: `Basic ${basicCredentials(credentials.clientId, secret, encoding)}`,
        },
        sentSecrets: sentSecretForms(credentials),
        facts,
      };
    },
  };
}
