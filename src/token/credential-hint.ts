/**
 * What to check when a token endpoint refuses our client credentials. The usual answer is the id
 * or the secret; but with `clientAuth: basic` a value holding characters that form encoding
 * changes (RFC 6749 §2.3.1 form-encodes id and secret before Base64) can be right and still be
 * refused by servers that do not decode them (old Spring Security OAuth2; golang.org/x/oauth2
 * calls the raw style `AuthStyleInHeaderNoEscape`). The hint then says so instead of sending the
 * user to re-check a secret that is correct.
 */
import type { TokenEndpointSpec } from "../config/types.js";

/** The values that decide the hint; never shown. */
export interface HintCredentials {
  clientId: string;
  clientSecret: string;
}

/** The hint when nothing points at the encoding: the id or the secret is wrong. */
export const CHECK_CREDENTIALS_HINT =
  "the token endpoint rejected the client credentials: check clientId/clientSecret";

/** application/x-www-form-urlencoded leaves only these unchanged (WHATWG URL, urlencoded serializer). */
const FORM_SAFE = /^[A-Za-z0-9*\-._]*$/;

/** Whether form encoding changes `value` (then form and raw Basic credentials differ). */
export function formEncodingChanges(value: string): boolean {
  return !FORM_SAFE.test(value);
}

/** The next step after the token endpoint rejected the client credentials. */
export function credentialsRejectedHint(
  spec: TokenEndpointSpec,
  credentials: HintCredentials,
): string {
  const basic = spec.clientAuth === "basic";
  const differs =
    formEncodingChanges(credentials.clientId) || formEncodingChanges(credentials.clientSecret);
  if (!basic || !differs) return CHECK_CREDENTIALS_HINT;
  // `basicEncoding` (form | raw) comes with the client-authentication methods; read it loosely
  // so this hint works before and after that option exists.
  const encoding = (spec as { basicEncoding?: unknown }).basicEncoding === "raw" ? "raw" : "form";
  const which = formEncodingChanges(credentials.clientSecret) ? "client secret" : "client id";
  if (encoding === "form") {
    return `the token endpoint rejected the client credentials; the ${which} contains characters that clientAuth: basic form-encodes before Base64 (RFC 6749 §2.3.1), which some servers do not decode (old Spring Security OAuth2, others): if the ${which} is right, set upstreams[].basicEncoding: raw (or clientAuth: body)`;
  }
  return `the token endpoint rejected the client credentials; the ${which} contains characters that basicEncoding: raw sends unencoded, and servers that follow RFC 6749 §2.3.1 form-decode them: if the ${which} is right, set upstreams[].basicEncoding: form`;
}
