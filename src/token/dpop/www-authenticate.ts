/**
 * `WWW-Authenticate` challenges (RFC 9110 §11.6.1), read leniently: a resource server may send
 * several challenges in one field (`Bearer realm="x", DPoP algs="ES256", error="…"`) or in
 * several, quote a parameter or not, and spell the scheme and parameter names in any case.
 * Commas separate both challenges and parameters: a token followed by `=` is a parameter of the
 * challenge before it, any other token starts a new challenge.
 */

/** One challenge: the scheme and parameter names lowercased, values unquoted. */
export interface Challenge {
  scheme: string;
  /** The first value of each parameter (RFC 9110: a name occurs once per challenge). */
  params: Record<string, string>;
  token68: string | undefined;
}

const TOKEN = /[!#$%&'*+\-.^_`|~0-9A-Za-z]+/y;
const TOKEN68 = /[A-Za-z0-9\-._~+/]+=*/y;

/** Every challenge in the field value(s), in order; unparseable stretches are skipped. */
export function parseChallenges(value: string | readonly string[] | undefined): Challenge[] {
  const out: Challenge[] = [];
  if (value === undefined) return out;
  for (const field of typeof value === "string" ? [value] : value) parseInto(field, out);
  return out;
}

/** The first challenge of `scheme` (case-insensitive), or undefined. */
export function findChallenge(
  value: string | readonly string[] | undefined,
  scheme: string,
): Challenge | undefined {
  const wanted = scheme.toLowerCase();
  return parseChallenges(value).find((c) => c.scheme === wanted);
}

function parseInto(s: string, out: Challenge[]): void {
  let current: Challenge | undefined;
  let i = 0;
  while (i < s.length) {
    i = skip(s, i, true);
    if (i >= s.length) break;
    const name = match(TOKEN, s, i);
    if (name === undefined) {
      // Not a token: skip to the next comma and forget the challenge it may have belonged to.
      const comma = s.indexOf(",", i);
      i = comma === -1 ? s.length : comma + 1;
      current = undefined;
      continue;
    }
    const end = i + name.length;
    let j = skip(s, end, false);
    if (current !== undefined && s[j] === "=") {
      j = skip(s, j + 1, false);
      let value: string;
      if (s[j] === '"') {
        [value, j] = quotedString(s, j);
      } else {
        value = match(TOKEN, s, j) ?? "";
        j += value.length;
      }
      const key = name.toLowerCase();
      if (!(key in current.params)) current.params[key] = value;
      i = j;
      continue;
    }
    current = { scheme: name.toLowerCase(), params: Object.create(null), token68: undefined };
    out.push(current);
    i = j;
    // `Basic dXNlcg==`: a token68 after the scheme, alone up to the next comma.
    if (j > end) {
      const t68 = match(TOKEN68, s, j);
      if (t68 !== undefined) {
        const after = skip(s, j + t68.length, false);
        if (after >= s.length || s[after] === ",") {
          current.token68 = t68;
          i = after;
        }
      }
    }
  }
}

function match(pattern: RegExp, s: string, at: number): string | undefined {
  pattern.lastIndex = at;
  return pattern.exec(s)?.[0];
}

/** Past spaces and tabs (and commas, between elements). */
function skip(s: string, i: number, commas: boolean): number {
  while (i < s.length) {
    const c = s[i];
    if (c !== " " && c !== "\t" && !(commas && c === ",")) break;
    i++;
  }
  return i;
}

/** RFC 9110 §5.6.4 quoted-string from the opening quote at `i`: its value and the index after. */
function quotedString(s: string, i: number): [string, number] {
  let value = "";
  for (i++; i < s.length; i++) {
    const c = s[i];
    if (c === '"') return [value, i + 1];
    if (c === "\\" && i + 1 < s.length) i++;
    value += s[i];
  }
  return [value, i]; // unterminated: what there is
}
