/**
 * Request and error counts for the last 15 minutes, per upstream and gateway-wide, for the status
 * page's sparklines and rates. A ring of 60 buckets of 15 s per upstream in shared chunks of
 * Uint32 (480 bytes per upstream that has seen traffic; ~4.7 MiB for 10,000), filled on the hot
 * path with a map lookup and two increments. No timer: a bucket is cleared when the clock has
 * moved past it, on the next write or read, so idle upstreams cost nothing.
 */

/** Width of one bucket. */
export const RATE_BUCKET_MS = 15_000;
/** Buckets kept: 60 × 15 s = 15 minutes. */
export const RATE_BUCKETS = 60;
/** Upstream rings allocated at once when the slab grows. */
const SLAB_CHUNK = 256;
/** Each ring holds RATE_BUCKETS request counts, then RATE_BUCKETS error counts. */
const RING_WIDTH = RATE_BUCKETS * 2;

/** Counts per bucket, oldest first; the last bucket is the current, partly elapsed one. */
export interface RateSeries {
  requests: number[];
  errors: number[];
  /** Monotonic ms at which the first (oldest) bucket began. */
  startMs: number;
  bucketMs: number;
}

export interface RecentRate {
  /** Requests per second over the last minute (the current bucket included, pro rata). */
  requestsPerSecond: number;
  errorsPerSecond: number;
  /** Totals over the whole 15-minute window. */
  requests15m: number;
  errors15m: number;
}

export interface RequestRates {
  /**
   * Count one finished request. `nowMs` is `performance.now()` (the caller has it already);
   * `error` marks a 5xx or an error the proxy answered itself (not a policy refusal: errors.ts
   * `isPolicyRefusal`).
   */
  record(upstream: string, error: boolean, nowMs: number): void;
  /** The upstream's last 15 minutes; all zeros for one that has seen no request. */
  series(upstream: string, nowMs: number): RateSeries;
  /** Every request of the gateway, routed or not. */
  totalSeries(nowMs: number): RateSeries;
  recent(upstream: string, nowMs: number): RecentRate;
  totalRecent(nowMs: number): RecentRate;
  /** Bytes held by the counters (the slab), for the memory figure in the docs. */
  bytes(): number;
}

/** One upstream's (or the total's) counters: a slice of a shared chunk. */
interface Ring {
  chunk: Uint32Array;
  /** Offset of this ring in `chunk`. */
  base: number;
  /** Absolute bucket number (floor(ms / RATE_BUCKET_MS)) last written; -Infinity: never. */
  last: number;
}

export function createRequestRates(): RequestRates {
  // Fixed-size chunks, never copied on growth (a growing slab cost seconds to reallocate).
  const chunks: Uint32Array[] = [];
  let used = SLAB_CHUNK;
  // Upstream names come from the config (plus "none" for unrouted requests): bounded.
  const ringOf = new Map<string, Ring>();

  function newRing(): Ring {
    if (used === SLAB_CHUNK) {
      chunks.push(new Uint32Array(SLAB_CHUNK * RING_WIDTH));
      used = 0;
    }
    return { chunk: chunks[chunks.length - 1]!, base: used++ * RING_WIDTH, last: -Infinity };
  }
  const total = newRing();

  function ringFor(upstream: string): Ring {
    let ring = ringOf.get(upstream);
    if (ring === undefined) {
      ring = newRing();
      ringOf.set(upstream, ring);
    }
    return ring;
  }

  /** Clear the buckets between the ring's last write and `bucket`, then make `bucket` current. */
  function advance(ring: Ring, bucket: number): void {
    const { chunk, base, last } = ring;
    if (bucket <= last) return;
    if (bucket - last >= RATE_BUCKETS) {
      chunk.fill(0, base, base + RING_WIDTH);
    } else {
      for (let b = last + 1; b <= bucket; b++) {
        chunk[base + (b % RATE_BUCKETS)] = 0;
        chunk[base + RATE_BUCKETS + (b % RATE_BUCKETS)] = 0;
      }
    }
    ring.last = bucket;
  }

  function bump(ring: Ring, bucket: number, error: boolean): void {
    if (bucket !== ring.last) advance(ring, bucket);
    const index = ring.base + (bucket % RATE_BUCKETS);
    ring.chunk[index]!++;
    if (error) ring.chunk[index + RATE_BUCKETS]!++;
  }

  function seriesOf(ring: Ring | undefined, nowMs: number): RateSeries {
    const bucket = Math.floor(nowMs / RATE_BUCKET_MS);
    const requests = new Array<number>(RATE_BUCKETS).fill(0);
    const errors = new Array<number>(RATE_BUCKETS).fill(0);
    const startMs = (bucket - RATE_BUCKETS + 1) * RATE_BUCKET_MS;
    if (ring !== undefined) {
      const { chunk, base, last } = ring;
      for (let k = 0; k < RATE_BUCKETS; k++) {
        const absolute = bucket - RATE_BUCKETS + 1 + k;
        // Buckets after the last write saw no request; those a full ring before it were reused;
        // those before the clock's zero (a process younger than 15 minutes) never existed.
        if (absolute < 0 || absolute > last || absolute <= last - RATE_BUCKETS) continue;
        const index = absolute % RATE_BUCKETS;
        requests[k] = chunk[base + index]!;
        errors[k] = chunk[base + RATE_BUCKETS + index]!;
      }
    }
    return { requests, errors, startMs, bucketMs: RATE_BUCKET_MS };
  }

  /** Rates without building the series: the page's summary reads this for every upstream. */
  function recentOf(ring: Ring | undefined, nowMs: number): RecentRate {
    const bucket = Math.floor(nowMs / RATE_BUCKET_MS);
    // The last minute: the current bucket so far plus the three before it.
    const currentElapsedMs = nowMs - bucket * RATE_BUCKET_MS;
    const seconds = (3 * RATE_BUCKET_MS + Math.max(1, currentElapsedMs)) / 1000;
    let minuteRequests = 0;
    let minuteErrors = 0;
    let allRequests = 0;
    let allErrors = 0;
    if (ring !== undefined) {
      const { chunk, base, last } = ring;
      for (
        let absolute = Math.max(0, bucket - RATE_BUCKETS + 1, last - RATE_BUCKETS + 1);
        absolute <= Math.min(bucket, last);
        absolute++
      ) {
        const index = absolute % RATE_BUCKETS;
        const requests = chunk[base + index]!;
        const errors = chunk[base + RATE_BUCKETS + index]!;
        allRequests += requests;
        allErrors += errors;
        if (absolute > bucket - 4) {
          minuteRequests += requests;
          minuteErrors += errors;
        }
      }
    }
    return {
      requestsPerSecond: round2(minuteRequests / seconds),
      errorsPerSecond: round2(minuteErrors / seconds),
      requests15m: allRequests,
      errors15m: allErrors,
    };
  }

  return {
    record(upstream, error, nowMs) {
      const bucket = Math.floor(nowMs / RATE_BUCKET_MS);
      bump(total, bucket, error);
      bump(ringFor(upstream), bucket, error);
    },
    series: (upstream, nowMs) => seriesOf(ringOf.get(upstream), nowMs),
    totalSeries: (nowMs) => seriesOf(total, nowMs),
    recent: (upstream, nowMs) => recentOf(ringOf.get(upstream), nowMs),
    totalRecent: (nowMs) => recentOf(total, nowMs),
    bytes: () => chunks.length * SLAB_CHUNK * RING_WIDTH * 4,
  };
}

function round2(value: number): number {
  return Math.round(value * 100) / 100;
}
