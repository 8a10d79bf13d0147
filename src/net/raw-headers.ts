/**
 * undici's raw header lists: `[name, value, name, value, …]`, each a Buffer or a string, in the
 * order and case the peer sent. Field bytes are read as latin1 (RFC 9110 §5.5: octets, not UTF-8).
 */

/** A raw header list as undici hands it over. */
export type RawHeaders = readonly (Buffer | string)[];

/** One item of a raw list as text. */
export function rawText(item: Buffer | string): string {
  return typeof item === "string" ? item : item.toString("latin1");
}

/** Every value of the field named `lowerName` (lowercase), in order. */
export function fieldValues(raw: RawHeaders, lowerName: string): string[] {
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    // Names of another length can't match: no text made, no lowercasing.
    if (name.length !== lowerName.length || rawText(name).toLowerCase() !== lowerName) continue;
    values.push(rawText(raw[i + 1]!));
  }
  return values;
}

/** The first value of the field named `lowerName` (lowercase), or undefined. */
export function firstFieldValue(raw: RawHeaders, lowerName: string): string | undefined {
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length !== lowerName.length || rawText(name).toLowerCase() !== lowerName) continue;
    return rawText(raw[i + 1]!);
  }
  return undefined;
}
