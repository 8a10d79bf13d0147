/**
 * Retry-After (RFC 9110 §10.2.3), read one way for the whole house: delta-seconds or an
 * HTTP-date in any of its three forms (§5.6.7). The token source turns the wait into whole
 * seconds under its own cap (token/response-text.ts), the pacers into a pause cut to the
 * entry's `maxPause` (pacing/pause.ts); what the header means is decided here only.
 */

const DELTA_SECONDS = /^\d+$/;
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
// RFC 9110 §5.6.7: IMF-fixdate, then the two obsolete forms every recipient must still accept.
const IMF_FIXDATE =
  /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC850_DATE =
  /^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME_DATE =
  /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/**
 * Milliseconds to wait from a Retry-After value, compared with `nowWallMs` (a date in the past
 * means 0); undefined when absent or unreadable. Uncapped: each caller applies its own bound.
 */
export function retryAfterMs(
  value: string | readonly string[] | undefined,
  nowWallMs: number,
): number | undefined {
  // Node joins repeated fields into an array; a second Retry-After is a sender error, use the first.
  const raw = typeof value === "string" ? value : value?.[0];
  if (raw === undefined) return undefined;
  const text = raw.trim();
  if (DELTA_SECONDS.test(text)) return Number(text) * 1000;
  const dateMs = parseHttpDate(text, nowWallMs);
  if (dateMs === undefined) return undefined;
  return Math.max(0, dateMs - nowWallMs);
}

/** An HTTP-date (any of the three forms) as epoch ms, or undefined. */
export function parseHttpDate(text: string, nowWallMs: number): number | undefined {
  let m = IMF_FIXDATE.exec(text);
  if (m) return utc(Number(m[3]), m[2]!, m[1]!, m[4]!, m[5]!, m[6]!);
  m = RFC850_DATE.exec(text);
  if (m) {
    // §5.6.7: a two-digit year more than 50 years ahead is the most recent past such year.
    const nowYear = new Date(nowWallMs).getUTCFullYear();
    let year = Math.floor(nowYear / 100) * 100 + Number(m[3]);
    if (year > nowYear + 50) year -= 100;
    return utc(year, m[2]!, m[1]!, m[4]!, m[5]!, m[6]!);
  }
  m = ASCTIME_DATE.exec(text);
  if (m) return utc(Number(m[6]), m[1]!, m[2]!.trim(), m[3]!, m[4]!, m[5]!);
  return undefined;
}

function utc(
  year: number,
  monthName: string,
  day: string,
  hours: string,
  minutes: string,
  seconds: string,
): number | undefined {
  const month = MONTHS.indexOf(monthName);
  if (month < 0) return undefined;
  const ms = Date.UTC(year, month, Number(day), Number(hours), Number(minutes), Number(seconds));
  // Date.UTC rolls 31 Feb over into March: such a date is malformed, not a later one.
  return new Date(ms).getUTCDate() === Number(day) ? ms : undefined;
}
