/**
 * Duration and size values as the config file writes them (schema.ts `Duration`, `ByteSize`),
 * converted to the milliseconds and bytes the runtime config uses.
 */

import { MAX_TIMER_MS } from "../base/clock.js";

/**
 * Longest duration accepted: Node.js runs a timer of at most 2^31 - 1 ms and fires a longer one
 * after 1 ms (TimeoutOverflowWarning), which would turn a long timeout into an instant one.
 */
export const MAX_DURATION_MS = MAX_TIMER_MS;

/** schema.ts `Duration`'s string form (a plain string: the runtime reads it without TypeBox). */
export const DURATION_PATTERN = "^[0-9]+(\\.[0-9]+)?(ms|s|m|h)$";
const DURATION = /^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)$/;
const SIZE = /^([0-9]+)(B|KiB|MiB|GiB|KB|MB|GB)$/;

const MS_PER_UNIT: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
const BYTES_PER_UNIT: Readonly<Record<string, number>> = {
  B: 1,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
  KB: 1000,
  MB: 1000 ** 2,
  GB: 1000 ** 3,
};

/**
 * Parse `"250ms"`, `"1.5s"`, `"2m"`, `"1h"` or a whole number of milliseconds.
 * Fractions are rounded to whole milliseconds. Throws on anything else (the schema has already
 * rejected such values, so a throw here is a bug, not a user mistake).
 */
export function parseDurationMs(value: string | number): number {
  if (typeof value === "number") return checkWhole(value, "duration");
  const m = DURATION.exec(value);
  if (!m) throw new TypeError(`not a duration: ${JSON.stringify(value)}`);
  return Math.round(Number(m[1]) * MS_PER_UNIT[m[2]!]!);
}

/** Parse `"64KiB"`, `"1MiB"`, `"512B"`, `"1MB"` (decimal) or a whole number of bytes. */
export function parseByteSize(value: string | number): number {
  if (typeof value === "number") return checkWhole(value, "size");
  const m = SIZE.exec(value);
  if (!m) throw new TypeError(`not a size: ${JSON.stringify(value)}`);
  return Number(m[1]) * BYTES_PER_UNIT[m[2]!]!;
}

function checkWhole(value: number, what: string): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`not a ${what}: ${value}`);
  return value;
}
