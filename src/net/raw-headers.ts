/**
 * undici's raw header lists: `[name, value, name, value, …]`, each a Buffer or a string, in the
 * order and case the peer sent. Field bytes are read as latin1 (RFC 9110 §5.5: octets, not UTF-8).
 */

/** A raw header list as undici hands it over. */
export type RawHeaders = readonly (Buffer | string)[];

/**
 * True when the field name `name` is `lowerName` (lowercase) in any letter case (RFC 9110 §5.1:
 * names are case-insensitive). Compares in place: lowercasing makes a new string for every
 * name that has a capital, and relayed names usually do (`Content-Length`, `Host`).
 */
export function isFieldName(name: string, lowerName: string): boolean {
  if (name.length !== lowerName.length) return false;
  if (name === lowerName) return true;
  for (let i = 0; i < name.length; i++) {
    let c = name.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) c += 0x20; // A–Z
    if (c !== lowerName.charCodeAt(i)) return false;
  }
  return true;
}

/** One item of a raw list as text. */
export function rawText(item: Buffer | string): string {
  return typeof item === "string" ? item : item.toString("latin1");
}

/** Every value of the field named `lowerName` (lowercase), in order. */
export function fieldValues(raw: RawHeaders, lowerName: string): string[] {
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    // Names of another length can't match: no text made.
    if (name.length !== lowerName.length || !isFieldName(rawText(name), lowerName)) continue;
    values.push(rawText(raw[i + 1]!));
  }
  return values;
}

/** The first value of the field named `lowerName` (lowercase), or undefined. */
export function firstFieldValue(raw: RawHeaders, lowerName: string): string | undefined {
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length !== lowerName.length || !isFieldName(rawText(name), lowerName)) continue;
    return rawText(raw[i + 1]!);
  }
  return undefined;
}
