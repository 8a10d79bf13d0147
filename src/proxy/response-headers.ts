/**
 * The upstream's response header list as sent to the client: raw order, duplicates (several
 * Set-Cookie) and case kept, hop-by-hop fields dropped (RFC 9110 §7.6.1), and `Connection: close`
 * added when the client connection must end after this response.
 * One pass per response: only names as long as some hop-by-hop name are compared (in place, no
 * lowercased copy), and fields nominated by `Connection` are filtered in a second pass only when
 * it names an end-to-end field.
 */
import { HOP_BY_HOP_HEADERS } from "../base/hop-by-hop.js";
import { isFieldName, type RawHeaders, rawText as text } from "../net/raw-headers.js";

const HOP_BY_HOP = new Set(HOP_BY_HOP_HEADERS);

/** The hop-by-hop names by length: a name of any other length needs no comparison. */
const HOP_BY_HOP_BY_LENGTH: string[][] = [];
for (const name of HOP_BY_HOP) {
  const sameLength = HOP_BY_HOP_BY_LENGTH[name.length] ?? [];
  sameLength.push(name);
  HOP_BY_HOP_BY_LENGTH[name.length] = sameLength;
}

/** The hop-by-hop field (lowercase) that `name` names, or undefined. */
function hopByHopName(name: string): string | undefined {
  const candidates = HOP_BY_HOP_BY_LENGTH[name.length];
  if (candidates === undefined) return undefined;
  for (const candidate of candidates) if (isFieldName(name, candidate)) return candidate;
  return undefined;
}

/**
 * Adds the field names a `Connection` value nominates. `close` and names already dropped as
 * hop-by-hop need no second pass, so they are left out.
 */
function addNominated(named: Set<string> | undefined, value: string): Set<string> | undefined {
  // The usual values ("keep-alive", "close") name nothing to filter.
  if (isFieldName(value, "keep-alive") || isFieldName(value, "close")) return named;
  for (const part of value.split(",")) {
    const token = part.trim().toLowerCase();
    if (token === "" || token === "close" || HOP_BY_HOP.has(token)) continue;
    named ??= new Set();
    named.add(token);
  }
  return named;
}

/** Flat [name, value, …] list for `res.writeHead`, from undici's raw response headers. */
export function clientResponseHeaders(raw: RawHeaders, closeConnection: boolean): string[] {
  let named: Set<string> | undefined;
  let out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = text(raw[i]!);
    const hopByHop = hopByHopName(name);
    if (hopByHop !== undefined) {
      if (hopByHop === "connection") named = addNominated(named, text(raw[i + 1]!));
      continue;
    }
    out.push(name, text(raw[i + 1]!));
  }
  if (named) {
    const nominated = named;
    const kept: string[] = [];
    for (let i = 0; i < out.length; i += 2) {
      if (!nominated.has(out[i]!.toLowerCase())) kept.push(out[i]!, out[i + 1]!);
    }
    out = kept;
  }
  if (closeConnection) out.push("connection", "close");
  return out;
}
