/**
 * "Did you mean …?" hints for near-miss keys, values and environment variable names.
 */

/**
 * The candidate closest to `word`, if it is close enough to be a plausible typo: the same word
 * in another case, one that starts with the other, or within an edit distance of about a third
 * of its length (at most 3). The nearest by edit distance wins, so "clientIdFlie" is
 * "clientIdFile" (one transposition) and not "clientId" (its start, four letters off).
 */
export function suggest(word: string, candidates: Iterable<string>): string | undefined {
  const lower = word.toLowerCase();
  const limit = Math.min(3, Math.max(1, Math.floor(word.length / 3)));
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of candidates) {
    if (candidate === word) continue;
    const other = candidate.toLowerCase();
    const d = editDistance(lower, other);
    // "warning" for "warn", "upstream" for "upstreams": a whole word with a bit more or less.
    const prefix =
      Math.min(lower.length, other.length) >= 3 &&
      (lower.startsWith(other) || other.startsWith(lower));
    if (d > limit && !prefix) continue;
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/** `' (did you mean "x"?)'` or "" — ready to append to a message. */
export function didYouMean(word: string, candidates: Iterable<string>): string {
  const hit = suggest(word, candidates);
  return hit === undefined ? "" : ` (did you mean "${hit}"?)`;
}

/** Optimal string alignment distance (Levenshtein plus adjacent transpositions). */
function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) =>
    Array.from({ length: cols }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        v = Math.min(v, d[i - 2]![j - 2]! + 1);
      }
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}
