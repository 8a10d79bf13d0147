/**
 * When a token source asks its token endpoint next: one timer, for the refresh point of the
 * token in hand or the retry after a failure, and the time it is set for (the status page shows
 * it; a request whose wait would end before it is refused at once).
 */
import type { Clock } from "../base/clock.js";

export class RefreshTimer {
  private timer: unknown;
  /** Monotonic ms of the next attempt while the timer runs. */
  private atMs: number | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly onFire: () => void,
  ) {}

  /** When the next attempt is due, while one is scheduled. */
  get nextAttemptAtMs(): number | undefined {
    return this.atMs;
  }

  get pending(): boolean {
    return this.timer !== undefined;
  }

  /** Fire at `atMs` (monotonic), replacing any attempt scheduled before. */
  schedule(atMs: number): void {
    this.clear();
    this.atMs = atMs;
    this.timer = this.clock.setTimeout(() => this.fire(), Math.max(0, atMs - this.clock.now()));
  }

  clear(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.atMs = undefined;
  }

  private fire(): void {
    this.timer = undefined;
    this.atMs = undefined;
    this.onFire();
  }
}
