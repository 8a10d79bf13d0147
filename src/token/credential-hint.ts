/**
 * What to check when a token endpoint refuses our client credentials. The usual answer is the id
 * or the secret; but with `clientAuth: basic` a value holding characters that form encoding
 * changes (RFC 6749 §2.3.1 form-encodes id and secret before Base64) can be right and still be
 * refused by servers that do not decode them (old Spring Security OAuth2; golang.org/x/oauth2
 * calls the raw style `AuthStyleInHeaderNoEscape`). The hint then says so instead of sending the
 * user to re-check a secret that is correct.
 */
import type { TokenEndpointSpec } from "../config/proxy-config.js";
import { formEncode } from "./client-auth/secret-forms.js";

/** The values that decide the hint; never shown. */
export interface HintCredentials {
  clientId: string;
  /** Undefined for the secretless methods. */
  clientSecret?: string | undefined;
}

/** The hint when nothing points at the encoding: the id or the secret is wrong. */
export const CHECK_CREDENTIALS_HINT =
  "the token endpoint rejected the client credentials: check clientId/clientSecret";

/** Whether form encoding changes `value` (then form and raw Basic credentials differ). */
export function formEncodingChanges(value: string): boolean {
  return formEncode(value) !== value;
}

/** What else than a secret the secretless methods present, to check when refused. */
const SECRETLESS_HINTS: Partial<Record<TokenEndpointSpec["clientAuth"], string>> = {
  "private-key-jwt":
    "the token endpoint rejected the client assertion: check that the IdP has clientKeyFile's public key (kid / certificate thumbprint) registered for this clientId and accepts its aud (assertion.audience)",
  "client-assertion-file":
    "the token endpoint rejected the client assertion: check the federated credential registered for this clientId (issuer, subject and audience of the assertion file)",
  "tls-client-auth":
    "the token endpoint rejected the client certificate: check that the IdP has it registered for this clientId and that the token URL asks for client certificates",
};

/** The next step after the token endpoint rejected the client credentials. */
export function credentialsRejectedHint(
  spec: TokenEndpointSpec,
  credentials: HintCredentials,
): string {
  const secretless = SECRETLESS_HINTS[spec.clientAuth];
  if (secretless !== undefined) return secretless;
  const secret = credentials.clientSecret ?? "";
  const differs = formEncodingChanges(credentials.clientId) || formEncodingChanges(secret);
  if (spec.clientAuth !== "basic" || !differs) return CHECK_CREDENTIALS_HINT;
  const encoding = spec.basicEncoding;
  const which = formEncodingChanges(secret) ? "client secret" : "client id";
  if (encoding === "form") {
    return `the token endpoint rejected the client credentials; the ${which} contains characters that clientAuth: basic form-encodes before Base64 (RFC 6749 §2.3.1), which some servers do not decode (old Spring Security OAuth2, others): if the ${which} is right, set upstreams[].basicEncoding: raw (or clientAuth: body)`;
  }
  return `the token endpoint rejected the client credentials; the ${which} contains characters that basicEncoding: raw sends unencoded, and servers that follow RFC 6749 §2.3.1 form-decode them: if the ${which} is right, set upstreams[].basicEncoding: form`;
}
