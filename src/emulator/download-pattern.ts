import { createHash } from "node:crypto";

/**
 * The bytes `GET /download/<n>` streams: byte `i` of the body is `i % 251`. A prime period keeps
 * the pattern out of step with any power-of-two buffer size, so a dropped, duplicated or
 * reordered chunk changes the digest.
 */
export const DOWNLOAD_PATTERN_PERIOD = 251;

/** One write's worth of pattern: a whole number of periods, so every chunk starts at phase 0. */
export const DOWNLOAD_CHUNK: Buffer = patternBytes(DOWNLOAD_PATTERN_PERIOD * 256);

function patternBytes(length: number): Buffer {
  const bytes = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) bytes[i] = i % DOWNLOAD_PATTERN_PERIOD;
  return bytes;
}

/** The first `bytes` bytes of a download, in memory (for small sizes). */
export function downloadPattern(bytes: number): Buffer {
  return patternBytes(bytes);
}

/** Hex SHA-256 of a `bytes`-long download, computed in chunks (fine for gigabytes). */
export function sha256OfDownload(bytes: number): string {
  const hash = createHash("sha256");
  let remaining = bytes;
  while (remaining > 0) {
    const size = Math.min(remaining, DOWNLOAD_CHUNK.length);
    hash.update(DOWNLOAD_CHUNK.subarray(0, size));
    remaining -= size;
  }
  return hash.digest("hex");
}
