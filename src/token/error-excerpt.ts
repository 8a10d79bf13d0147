/**
 * A short, safe excerpt of a token endpoint's answer when it is not an RFC 6749 §5.2 error
 * (`{"ErrorCode":…}`, `{"status":403,"message":…}`, `{"error":{"message":…}}`, an HTML page,
 * plain text): what the provider said, so a bad secret is diagnosable on every provider, minus
 * anything that could be a credential.
 *
 * Order matters: our own values are cut out before and after the text is normalised (HTML to
 * text, controls and runs of white space to one space), then anything token-looking, and only
 * then is it truncated — cutting after normalising means no rewrite can join two halves of a
 * secret, and truncating last means no partial secret survives at the edge. A final check
 * withholds the whole excerpt if any of our values is still in it (e.g. one that is part of the
 * marker), and a body that names `access_token` is never shown at all.
 */

/** Longest excerpt, in characters. */
export const EXCERPT_MAX_LENGTH = 200;

/** What replaces one of our own values. */
const REDACTED = "[redacted]";
/**
 * Stands for a cut value until token-looking runs are replaced: a private-use character that
 * counts as part of a run, so a token that contained one of our values is still removed whole
 * rather than left in pieces around the marker.
 */
const CUT = "\uE000";
/** What replaces a token-looking run. */
const TOKEN_MARK = "[token?]";
/** Shown instead when, against all odds, one of our values survived the cutting. */
const WITHHELD = "(withheld: it contained the client credentials)";
/** Shown instead of a body that names an access_token field. */
const ACCESS_TOKEN_WITHHELD = "(withheld: the body has an access_token field)";
/**
 * A run of 20+ characters of the token alphabets (base64, base64url, hex, JWT dots, Salesforce's
 * `!`) with at least one letter and one digit: JWTs, opaque tokens, secrets, also UUIDs (trace
 * ids are lost — an acceptable price, since some servers issue UUIDs as tokens).
 */
const TOKEN_RUN = /[A-Za-z0-9\-._~+/=!%\uE000]{20,}/g;
const HAS_LETTER = /[A-Za-z]/;
const HAS_DIGIT = /[0-9]/;

/**
 * The excerpt of `text` (undefined when nothing is left), with every value of `ownValues` (the
 * client id and secret in every form they were sent) and every token-looking run removed.
 */
export function errorExcerpt(
  text: string,
  contentType: string,
  ownValues: readonly string[],
): string | undefined {
  // Each value as it would read after normalising; longest first, so a form that contains
  // another is removed whole.
  const values = [...new Set(ownValues.map(normalise))]
    .filter((v) => v.length > 0)
    .sort((a, b) => b.length - a.length);
  const leaks = (t: string) => values.some((value) => t.includes(value));
  // A body that names access_token holds a token, however broken the rest (a truncated JSON
  // success, a form body): a short token would pass for a word, so none of it is shown.
  if (/access_token/i.test(text)) {
    return leaks(ACCESS_TOKEN_WITHHELD) ? undefined : ACCESS_TOKEN_WITHHELD;
  }
  const cut = (t: string) => values.reduce((acc, value) => acc.split(value).join(CUT), t);
  // Cut before reading too: stripping HTML tags could otherwise break a value into pieces.
  let excerpt = cut(normalise(readable(cut(normalise(text)), contentType)));
  excerpt = excerpt.replace(TOKEN_RUN, (run) =>
    HAS_LETTER.test(run) && HAS_DIGIT.test(run) ? TOKEN_MARK : run,
  );
  excerpt = normalise(excerpt.split(CUT).join(REDACTED));
  if (excerpt.length === 0) return undefined;
  if (excerpt.length > EXCERPT_MAX_LENGTH) {
    excerpt = `${excerpt.slice(0, EXCERPT_MAX_LENGTH - 1)}…`;
  }
  if (leaks(excerpt)) return leaks(WITHHELD) ? undefined : WITHHELD;
  return excerpt;
}

/** The body as a human would read it: JSON compacted, HTML reduced to its text. */
function readable(text: string, contentType: string): string {
  const trimmed = text.trim();
  if (/html/i.test(contentType) || /^<(!doctype|html|head|body)/i.test(trimmed)) {
    return htmlText(trimmed);
  }
  if (trimmed.startsWith("{") || trimmed.startsWith("[")) {
    try {
      return JSON.stringify(JSON.parse(trimmed));
    } catch {
      return trimmed;
    }
  }
  return trimmed;
}

function htmlText(html: string): string {
  return html
    .replace(/<!--[\s\S]*?(-->|$)/g, " ")
    .replace(/<(script|style)\b[\s\S]*?(<\/\1\s*>|$)/gi, " ")
    .replace(/<[^>]*>?/g, " ")
    .replace(/&nbsp;/gi, " ")
    .replace(/&lt;/gi, "<")
    .replace(/&gt;/gi, ">")
    .replace(/&quot;/gi, '"')
    .replace(/&#39;|&apos;/gi, "'")
    .replace(/&amp;/gi, "&");
}

/** Controls (C0, DEL, C1) and white space runs to one space, trimmed. */
function normalise(text: string): string {
  return text.replace(/[\s\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
}
