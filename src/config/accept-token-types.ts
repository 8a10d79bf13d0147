/**
 * Token types (RFC 6749 §7.1) and what bearer-proxy can do with them: it sends a bearer token as
 * `Authorization: Bearer <token>` (RFC 6750), so it accepts `Bearer` and, when the user lists
 * them in `token.acceptTokenTypes`, provider-specific names for the same thing (Apigee's
 * `BearerToken`). A `DPoP` token is accepted only from an upstream with `dpop` set, never through
 * this list (token/token-response.ts decides); other types are never accepted, listed or not.
 */
import type { IssueList, IssuePath } from "./issues.js";

/** `token.acceptTokenTypes` when unset. */
export const DEFAULT_ACCEPT_TOKEN_TYPES: readonly string[] = ["Bearer"];

/**
 * Lowercased token types that must never be sent as a bearer token, with the reason. A DPoP token
 * is bound to a key and needs a fresh signed proof on every request (RFC 9449 §7.1): sent as
 * Bearer it is refused at best, and downgrading it would defeat the binding; bearer-proxy makes
 * the proofs only for an upstream with `dpop` set, so the reason names that setting. `N_A` says the
 * issued token is not an access token at all (RFC 8693 §2.2.1). MAC / PoP tokens need a
 * per-request signature (draft-ietf-oauth-v2-http-mac, RFC 7800) that bearer-proxy does not make.
 */
export const NON_BEARER_TOKEN_TYPES: ReadonlyMap<string, string> = new Map([
  [
    "dpop",
    "a DPoP token is bound to a key and needs a signed proof on every request (RFC 9449), which bearer-proxy makes only for an upstream with dpop set; set upstreams[].dpop to use DPoP-bound tokens",
  ],
  ["n_a", "N_A means the issued token is not an access token (RFC 8693 §2.2.1)"],
  ["mac", "a MAC token needs a signature on every request, which bearer-proxy does not make"],
  [
    "pop",
    "a proof-of-possession token needs a proof on every request, which bearer-proxy does not make",
  ],
]);

/** Refuse, at start, a `token.acceptTokenTypes` entry that is not a bearer token type. */
export function checkAcceptTokenTypes(value: unknown, at: IssuePath, issues: IssueList): void {
  if (!Array.isArray(value)) return; // the schema reports the wrong type
  value.forEach((entry, i) => {
    if (typeof entry !== "string") return;
    const reason = NON_BEARER_TOKEN_TYPES.get(entry.toLowerCase());
    if (reason !== undefined) {
      issues.add(
        [...at, i],
        `expected a name for a bearer token such as "Bearer" or "BearerToken", found ${JSON.stringify(entry)}: ${reason}`,
      );
    }
  });
}
