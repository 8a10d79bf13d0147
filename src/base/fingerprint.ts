/**
 * The only form in which a secret or token may appear in logs, metrics or status pages.
 */
import { createHash } from "node:crypto";

/** First 8 hex characters of sha256(value). */
export function fingerprint(value: string): string {
  return createHash("sha256").update(value).digest("hex").slice(0, 8);
}

/** Full sha256 hex of value: for in-memory cache keys and version tags, never shown. */
export function hashValue(value: string): string {
  return createHash("sha256").update(value).digest("hex");
}
