/**
 * A token source's fetches as counted for /status and metrics: token endpoint requests by
 * outcome and duration, tokens taken from the shared cache, and the expiry of the token in hand,
 * labelled with every upstream that shares the source.
 */
import type { Metrics } from "../observability/metrics.js";

export class FetchCounters {
  /** Token endpoint requests, counted when they end. */
  fetchCount = 0;
  failureCount = 0;
  /** Tokens taken from the shared cache instead of asked of the token endpoint. */
  sharedCacheHits = 0;

  constructor(
    private readonly labels: readonly string[],
    private readonly metrics: Metrics | undefined,
  ) {}

  /**
   * A fetch ended after `durationMs`. A token read from the shared cache was no token endpoint
   * request: the fetch metrics and fetchCount leave it out, so "one request per credential" can
   * be checked across replicas.
   */
  ended(durationMs: number, fromSharedCache: boolean): void {
    if (fromSharedCache) {
      this.sharedCacheHits++;
      for (const upstream of this.labels) this.metrics?.tokenSharedCacheHitsTotal.inc({ upstream });
      return;
    }
    this.fetchCount++;
    for (const upstream of this.labels) {
      this.metrics?.tokenFetchDurationSeconds.observe({ upstream }, durationMs / 1000);
    }
  }

  /** A token endpoint request's outcome: "success" or the error code. */
  outcome(outcome: string): void {
    for (const upstream of this.labels) this.metrics?.tokenFetchesTotal.inc({ upstream, outcome });
  }

  failed(code: string): void {
    this.outcome(code);
    this.failureCount++;
  }

  expiresAt(wallMs: number): void {
    for (const upstream of this.labels) {
      this.metrics?.tokenExpiryTimestampSeconds.set({ upstream }, wallMs / 1000);
    }
  }
}
