/**
 * The encodings a client secret travels in. Shared by the two secret methods (what to send) and
 * by redaction (what to cut out of anything an IdP echoes back).
 */

/** application/x-www-form-urlencoded encoding of one value (space becomes "+"). */
export function formEncode(value: string): string {
  return new URLSearchParams([["", value]]).toString().slice(1);
}

/**
 * The base64 credentials of an HTTP Basic header. `form` (RFC 6749 §2.3.1) form-encodes id and
 * secret first; `raw` does not, for servers that never decode them (old Spring Security OAuth2;
 * golang.org/x/oauth2 `AuthStyleInHeaderNoEscape`).
 */
export function basicCredentials(
  clientId: string,
  clientSecret: string,
  encoding: "form" | "raw",
): string {
  const [id, secret] =
    encoding === "form"
      ? [formEncode(clientId), formEncode(clientSecret)]
      : [clientId, clientSecret];
  return Buffer.from(`${id}:${secret}`, "utf8").toString("base64");
}

/** Every form in which a token request may carry the secret. */
export function sentSecretForms(credentials: {
  clientId: string;
  clientSecret?: string | undefined;
}): string[] {
  const { clientId, clientSecret } = credentials;
  if (clientSecret === undefined) return [];
  return [
    clientSecret,
    formEncode(clientSecret),
    encodeURIComponent(clientSecret),
    JSON.stringify(clientSecret).slice(1, -1),
    basicCredentials(clientId, clientSecret, "form"),
    basicCredentials(clientId, clientSecret, "raw"),
  ];
}
