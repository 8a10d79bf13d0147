/**
 * Belt and braces for admin output. Nothing the admin routes read should carry a secret
 * (TokenStatus is secret-free by contract), but an IdP may echo a submitted client secret in an
 * `error_description`, so inline secrets from the config (raw and in every encoding a token
 * request carries them) are scrubbed from every string we emit.
 */
import type { UpstreamConfig } from "../config/types.js";
import { sentSecretForms } from "../token/client-credentials.js";

const CENSOR = "[redacted]";
// Shorter values would match ordinary words and garble the output; no real secret is this short.
const MIN_SECRET_LENGTH = 4;

export type Scrubber = (text: string) => string;

/** A function that replaces every inline client secret from the config with `[redacted]`. */
export function createScrubber(upstreams: readonly UpstreamConfig[]): Scrubber {
  const secrets = new Set<string>();
  for (const u of upstreams) {
    const secret = u.token.clientSecret;
    if (secret?.kind === "inline" && secret.value.length >= MIN_SECRET_LENGTH) {
      // The forms it was sent in too: an IdP may echo the request body or header back.
      const clientId = u.token.clientId.kind === "inline" ? u.token.clientId.value : "";
      for (const form of sentSecretForms({ clientId, clientSecret: secret.value })) {
        secrets.add(form);
      }
    }
  }
  // Longest first, so a secret that contains another is removed whole.
  const ordered = [...secrets].sort((a, b) => b.length - a.length);
  if (ordered.length === 0) return (text) => text;
  return (text) => ordered.reduce((acc, secret) => acc.replaceAll(secret, CENSOR), text);
}

/**
 * A configured URL as shown on /status: without userinfo (`user:pass@`), and with the query
 * (allowed in a token URL, and a common home for API keys) shown as `?…`. Unparsable input is
 * returned as is.
 */
export function displayUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (!parsed.username && !parsed.password && !parsed.search && !parsed.hash) return url;
    parsed.username = "";
    parsed.password = "";
    const query = parsed.search === "" ? "" : "?…";
    parsed.search = "";
    parsed.hash = "";
    return `${parsed.toString()}${query}`;
  } catch {
    return url;
  }
}

/** Apply `scrub` to every string inside a JSON-like value (keys included). */
export function scrubDeep<T>(value: T, scrub: Scrubber): T {
  if (typeof value === "string") return scrub(value) as T;
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, scrub)) as T;
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [scrub(k), scrubDeep(v, scrub)]),
    ) as T;
  }
  return value;
}
