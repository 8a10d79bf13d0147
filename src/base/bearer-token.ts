/**
 * What a bearer token may be, for every place that checks one: a token response, the Redis
 * cache reader, header injection, and a token file (`callers.kubernetes.jwksTokenFile`).
 */

/**
 * What may follow `Bearer ` in an Authorization header: visible ASCII without space. Wider than
 * RFC 6750 §2.1's b64token because Salesforce tokens contain `!`; still nothing that could end,
 * split or extend the header (no space, control, CR/LF, DEL or non-ASCII).
 */
const BEARER_TOKEN = /^[\x21-\x7e]+$/;

/** Whether `value` may be sent as `Authorization: Bearer <value>`. */
export function isBearerTokenSyntax(value: string): boolean {
  return BEARER_TOKEN.test(value);
}

/** The token in a token file's text, or why there is none (never quoting the text). */
export function parseBearerTokenFile(
  text: string,
): { ok: true; token: string } | { ok: false; problem: string } {
  // A Secret written with `echo` ends in a newline; projected tokens don't. Either is one token.
  const token = text.trim();
  if (token === "") return { ok: false, problem: "found an empty file" };
  // The project's one rule for a bearer token (wider than RFC 6750's b64token, which Kubernetes
  // static and bootstrap tokens need not fit): one header-safe word.
  if (!isBearerTokenSyntax(token)) {
    return {
      ok: false,
      problem: "found text that is not one token (spaces, line breaks or non-ASCII characters)",
    };
  }
  return { ok: true, token };
}
