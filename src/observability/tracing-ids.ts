/**
 * Trace and span ids for the request spans (tracing-sdk.ts), drawn from a pool of random bytes
 * filled by the OS generator a few KiB at a time. Every traced request draws two or three ids,
 * sampled or not; the SDK's RandomIdGenerator makes each from 2–4 `Math.random` calls written
 * into a shared Buffer and hex-encoded — a call chain per id where a slice of the pool is one
 * native hex encoding. Ids need to be unique, not secret (W3C Trace Context: random, not
 * all zero), and the pool gives that with fewer calls per request.
 *
 * A request with no parent to continue (most of them) draws its three ids at once
 * (`drawRootIds`): one hex encoding, and the trace id's sampling key read from its bytes.
 */
import { randomFillSync } from "node:crypto";

/**
 * Bytes drawn per refill: 2,048 requests' worth of a trace id and two span ids. A refill
 * between requests finds OpenSSL's generator cold: 10–100 µs a call in the proxy (measured),
 * where a loop of calls takes 3 µs for 4 KiB and 10 µs for 64 KiB. So the pool is large.
 */
const POOL_BYTES = 65_536;

const pool = Buffer.allocUnsafe(POOL_BYTES);
let offset = POOL_BYTES;

function allZero(start: number, end: number): boolean {
  for (let i = start; i < end; i++) if (pool[i] !== 0) return false;
  return true;
}

/** The next `bytes` bytes of the pool (refilled when short): the offset they start at. */
function take(bytes: number): number {
  if (offset + bytes > POOL_BYTES) {
    randomFillSync(pool);
    offset = 0;
  }
  const start = offset;
  offset += bytes;
  return start;
}

/** `bytes` random bytes as lowercase hex; never all zeros (an invalid id in W3C terms). */
function drawId(bytes: number): string {
  for (;;) {
    const start = take(bytes);
    if (!allZero(start, start + bytes)) return pool.toString("hex", start, start + bytes);
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

/** The ids a request without a parent starts with, drawn together. */
export interface RootIds {
  readonly traceId: string;
  /** Its SERVER span's id. */
  readonly spanId: string;
  /** The span id of its first upstream attempt. */
  readonly attemptSpanId: string;
  /**
   * The trace id's four big-endian 32-bit words XORed: the number the SDK's
   * TraceIdRatioBasedSampler compares with its bound (its `_accumulate`, which reads the same
   * words from the hex), here read from the bytes.
   */
  readonly samplingKey: number;
}

/**
 * A trace id and two span ids from 32 bytes of the pool, hex-encoded at once; none all zeros.
 */
export function drawRootIds(): RootIds {
  for (;;) {
    const start = take(32);
    if (
      allZero(start, start + 16) ||
      allZero(start + 16, start + 24) ||
      allZero(start + 24, start + 32)
    )
      continue;
    const hex = pool.toString("hex", start, start + 32);
    const samplingKey =
      (pool.readUInt32BE(start) ^
        pool.readUInt32BE(start + 4) ^
        pool.readUInt32BE(start + 8) ^
        pool.readUInt32BE(start + 12)) >>>
      0;
    return {
      traceId: hex.slice(0, 32),
      spanId: hex.slice(32, 48),
      attemptSpanId: hex.slice(48),
      samplingKey,
    };
  }
}
