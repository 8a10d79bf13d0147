/**
 * Trace and span ids for the request spans (tracing-sdk.ts), drawn from a pool of random bytes
 * filled by the OS generator a few KiB at a time. Every traced request draws two or three ids,
 * sampled or not; the SDK's RandomIdGenerator makes each from 2–4 `Math.random` calls written
 * into a shared Buffer and hex-encoded — a call chain per id where a slice of the pool is one
 * native hex encoding. Ids need to be unique, not secret (W3C Trace Context: random, not
 * all zero), and the pool gives that with fewer calls per request.
 */
import { randomFillSync } from "node:crypto";

/** Bytes drawn per refill: 128 requests' worth of a trace id and two span ids. */
const POOL_BYTES = 4096;

const pool = Buffer.allocUnsafe(POOL_BYTES);
let offset = POOL_BYTES;

function allZero(start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (pool[i] !== 0) return false;
  return true;
}

/** `bytes` random bytes as lowercase hex; never all zeros (an invalid id in W3C terms). */
function drawId(bytes: number): string {
  for (;;) {
    if (offset + bytes > POOL_BYTES) {
      randomFillSync(pool);
      offset = 0;
    }
    const start = offset;
    offset += bytes;
    if (!allZero(start, offset)) return pool.toString("hex", start, offset);
  }
}

/** A trace id: 16 random bytes, 32 hex digits. */
export function newTraceId(): string {
  return drawId(16);
}

/** A span id: 8 random bytes, 16 hex digits. */
export function newSpanId(): string {
  return drawId(8);
}
