/**
 * One canonical form of a request path, made once at the door (src/proxy/request-guards.ts) so
^ * that the path the route matched, `allow` admitted, the pacer counted and the access log wrote is the
 * path the upstream receives. A router matching raw bytes while the upstream decodes them is the
 * classic path-rule bypass (Istio CVE-2021-31920: `/%61dmin`, `/admin%2fx`, `//admin` walking
 * around a rule on `/admin/`); Envoy answers it with `normalize_path`, `merge_slashes` and
 * `path_with_escaped_slashes_action`, and so do the rules here:
 * - a percent-encoded unreserved character (ALPHA DIGIT `-._~`) is decoded (RFC 3986 §6.2.2.2);
 * - every other percent-encoding keeps its byte, its hex written in uppercase (§6.2.2.1), so
 *   `%2f` and `%2F` are one path and `%25` stays `%25`: nothing is ever decoded twice;
 * - repeated slashes merge (`mergeSlashes`);
 * - an encoded slash follows `escapedSlashes`: refused, decoded (and then merged like a literal
 *   one), or kept as `%2F`;
 * - a `%` not followed by two hex digits is refused: readers disagree about it, and decoding
 *   around it could forge an escape (`%%32%66` → `%2f`).
 * Only the path: the query string is never touched. Dot-segments and backslashes are refused
 * before this runs (src/proxy/request-guards.ts `hasUnsafePathSegment`); nothing here can create one.
 *
 * The result is a fixed point (normalizing it again changes nothing). A path with no `%` and no
 * `//` — nearly every real request — is returned as it came, after two `indexOf` scans.
 */

/** What an encoded slash (`%2F`) in a path becomes. */
export type EscapedSlashes = "reject" | "unescape" | "keep";

/** How paths are normalized (`paths` in the config). */
export interface PathRules {
  /** Merge repeated slashes. */
  mergeSlashes: boolean;
  escapedSlashes: EscapedSlashes;
}

/** Why a path has no normalized form. */
export interface PathRefusal {
  readonly refused: "escaped_slash" | "malformed_escape";
}

/** An encoded slash with `escapedSlashes: reject`. */
export const ESCAPED_SLASH: PathRefusal = Object.freeze({ refused: "escaped_slash" });
/** A `%` not followed by two hex digits (RFC 3986 §2.1). */
export const MALFORMED_ESCAPE: PathRefusal = Object.freeze({ refused: "malformed_escape" });

const SLASH = 0x2f;
const PERCENT = 0x25;
const UPPER_HEX = "0123456789ABCDEF";

/** ALPHA DIGIT "-" "." "_" "~" (RFC 3986 §2.3), by byte value. */
const UNRESERVED = new Uint8Array(128);
for (let c = 0; c < 128; c++) {
  const ch = String.fromCharCode(c);
  if (/[A-Za-z0-9._~-]/.test(ch)) UNRESERVED[c] = 1;
}

/** A hex digit's value, or -1 (also for NaN: past the end of the string). */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x57;
  return -1;
}

/**
 * The normalized form of `path` (the part of a request target before `?`, starting with "/"),
 * or why it has none.
 */
export function normalizePath(path: string, rules: PathRules): string | PathRefusal {
  if (path.indexOf("%") === -1 && !(rules.mergeSlashes && path.indexOf("//") !== -1)) {
    return path;
  }
  return rewrite(path, rules);
}

function rewrite(path: string, rules: PathRules): string | PathRefusal {
  const { mergeSlashes, escapedSlashes } = rules;
  let out = "";
  /** Start of the run of input not yet copied to `out`. */
  let copiedTo = 0;
  /** The last character written (or about to be copied) is a slash. */
  let afterSlash = false;
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i);
    if (c === SLASH) {
      if (afterSlash && mergeSlashes) {
        out += path.slice(copiedTo, i);
        copiedTo = i + 1;
      }
      afterSlash = true;
      continue;
    }
    if (c !== PERCENT) {
      afterSlash = false;
      continue;
    }
    const high = hexValue(path.charCodeAt(i + 1));
    const low = hexValue(path.charCodeAt(i + 2));
    if (high < 0 || low < 0) return MALFORMED_ESCAPE;
    const byte = high * 16 + low;
    const start = i;
    i += 2;
    if (byte < 128 && UNRESERVED[byte] === 1) {
      out += path.slice(copiedTo, start) + String.fromCharCode(byte);
      copiedTo = i + 1;
      afterSlash = false;
    } else if (byte === SLASH && escapedSlashes !== "keep") {
      if (escapedSlashes === "reject") return ESCAPED_SLASH;
      // unescape: from here on it is a slash like any other, merged like one.
      out += path.slice(copiedTo, start);
      if (!(afterSlash && mergeSlashes)) out += "/";
      copiedTo = i + 1;
      afterSlash = true;
    } else {
      // Kept; only a lowercase hex digit needs rewriting (an uppercase escape is copied as is).
      if (path.charCodeAt(start + 1) > 0x60 || path.charCodeAt(start + 2) > 0x60) {
        out += `${path.slice(copiedTo, start)}%${UPPER_HEX[high]}${UPPER_HEX[low]}`;
        copiedTo = i + 1;
      }
      afterSlash = false;
    }
  }
  return copiedTo === 0 ? path : out + path.slice(copiedTo);
}
