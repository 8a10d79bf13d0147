/**
 * The logger behind the per-request access line. That line is built from a fixed allow-list of
 * fields (see request-log.ts) that never holds a header, a query string or a token, so the base
 * logger's redaction paths can't match anything in it — yet pino runs its wildcard redactors on
 * every field of every line, which made the access line ~5× dearer than the rest of the record.
 * The access logger is a child without redaction (pino: `redact: []` removes the parent's) and,
 * when the parent stamps ISO times, with the same ISO string computed at most once per ms.
 */
import { type Logger, pino } from "pino";

/** `,"time":"<ISO>"` as pino's `isoTime` writes it, rebuilt only when the millisecond changes. */
export function createCachedIsoTime(now: () => number = Date.now): () => string {
  let lastMs = Number.NaN;
  let last = "";
  return () => {
    const ms = now();
    if (ms !== lastMs) {
      lastMs = ms;
      last = `,"time":"${new Date(ms).toISOString()}"`;
    }
    return last;
  };
}

/**
 * Derives the access logger from the app's logger: same level, destination, base fields and
 * formatters; no redaction; the cached ISO time when the parent uses pino's `isoTime` (output
 * identical, so a log pipeline can't tell the lines apart).
 */
export function deriveAccessLogger(base: Logger): Logger {
  const child = base.child({}, { redact: [] });
  const { timeSym } = pino.symbols;
  const holder = child as unknown as Record<symbol, unknown>;
  // pino.symbols is pino's published seam for integrations; touch it only when the result is
  // byte-identical to what the parent would write.
  if (holder[timeSym] === pino.stdTimeFunctions.isoTime) {
    holder[timeSym] = createCachedIsoTime();
  }
  return child;
}
