/**
 * Belt and braces for admin output. Nothing the admin routes read should carry a secret
 * (TokenStatus is secret-free by contract), but an IdP may echo a submitted client secret in an
 * `error_description`, so inline secrets from the config (raw and in every encoding a token
 * request carries them) are scrubbed from every string we emit.
 */
import type { UpstreamConfig } from "../config/proxy-config.js";
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
  return indexedScrubber(secrets);
}

/** Lengths of the prefixes secrets are indexed by (each under the longest that fits it). */
const PREFIX_LENGTHS = [32, 16, 8, MIN_SECRET_LENGTH] as const;

/**
 * Replace every occurrence of any of `secrets` in one pass over the text: candidates are found
 * by a prefix (up to 32 characters, so secrets sharing a vendor prefix such as "sk_live_" do
 * not pile up), and a gateway with 10,000 inline secrets scrubs a string in time proportional
 * to its length, not to the secret count.
 */
function indexedScrubber(secrets: ReadonlySet<string>): Scrubber {
  if (secrets.size === 0) return (text) => text;
  const indexes = PREFIX_LENGTHS.map((length) => ({
    length,
    byPrefix: new Map<string, string[]>(),
  }));
  for (const secret of secrets) {
    const index = indexes.find((ix) => secret.length >= ix.length)!;
    const prefix = secret.slice(0, index.length);
    const list = index.byPrefix.get(prefix);
    if (list) list.push(secret);
    else index.byPrefix.set(prefix, [secret]);
  }
  const used = indexes.filter((ix) => ix.byPrefix.size > 0);
  // The longest match at a position wins.
  const longestAt = (text: string, i: number): number => {
    let longest = 0;
    for (const { length, byPrefix } of used) {
      if (i + length > text.length) continue;
      const candidates = byPrefix.get(text.slice(i, i + length));
      if (!candidates) continue;
      for (const secret of candidates) {
        if (secret.length > longest && text.startsWith(secret, i)) longest = secret.length;
      }
    }
    return longest;
  };
  return (text) => {
    // Every match is found (overlapping ones too) and the union of their spans is censored, so
    // no part of a secret survives next to another that overlaps it.
    let out = "";
    let copiedTo = 0;
    let spanStart = -1;
    let spanEnd = -1;
    for (let i = 0; i + MIN_SECRET_LENGTH <= text.length; i++) {
      const length = longestAt(text, i);
      if (length === 0) continue;
      if (i > spanEnd) {
        if (spanStart >= 0) out += text.slice(copiedTo, spanStart) + CENSOR;
        if (spanStart >= 0) copiedTo = spanEnd;
        spanStart = i;
      }
      spanEnd = Math.max(spanEnd, i + length);
    }
    if (spanStart < 0) return text;
    return out + text.slice(copiedTo, spanStart) + CENSOR + text.slice(spanEnd);
  };
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
