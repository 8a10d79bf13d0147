import type { IncomingMessage, ServerResponse } from "node:http";
import { type FakeUpstream, startFakeUpstream } from "./fake-upstreams.js";
import type { ServerCertificate } from "./tls.js";

/**
 * An HTTPS upstream that enforces its limit the way real APIs do (issue 26): at most `limit`
 * accepted requests in *any* rolling window of `windowMs`, counted over (now − window, now].
 * Over the limit it answers 429 with a Retry-After (delta-seconds or an HTTP-date) and accepts
 * nothing more. It records every arrival (performance.now ms, the pacers' clock), so a test can
 * assert the most requests that ever arrived within one window.
 */
export interface LimitedUpstream {
  /** `https://127.0.0.1:<port>`. */
  origin: string;
  /** Arrival time of every request, in arrival order. */
  arrivals: number[];
  /** Requests answered 200. */
  accepted(): number;
  /** Requests answered 429. */
  rejected(): number;
  /** The most requests (accepted or not) that arrived within any window of `windowMs`. */
  maxInAnyWindow(windowMs?: number): number;
  /** Forget arrivals and counts (the limit's memory too). */
  reset(): void;
  server: FakeUpstream;
  close(): Promise<void>;
}

export interface LimitedUpstreamOptions {
  cert: ServerCertificate;
  /** Requests accepted in any rolling window. */
  limit: number;
  /** Default 1000 ms. */
  windowMs?: number;
  /** How the 429's Retry-After is written; default delta-seconds. */
  retryAfter?: "delta" | "date";
}

export async function startLimitedUpstream(
  options: LimitedUpstreamOptions,
): Promise<LimitedUpstream> {
  const windowMs = options.windowMs ?? 1_000;
  let arrivals: number[] = [];
  /** Times of accepted requests still inside the window, oldest first. */
  let inWindow: number[] = [];
  let accepted = 0;
  let rejected = 0;

  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const nowMs = performance.now();
    arrivals.push(nowMs);
    while (inWindow.length > 0 && inWindow[0]! <= nowMs - windowMs) inWindow.shift();
    req.resume();
    if (inWindow.length >= options.limit) {
      rejected++;
      const waitMs = inWindow[0]! + windowMs - nowMs;
      const retryAfter =
        options.retryAfter === "date"
          ? new Date(Date.now() + waitMs + 1_000).toUTCString()
          : String(Math.max(1, Math.ceil(waitMs / 1000)));
      const body = JSON.stringify({ error: "rate_limited" });
      res.writeHead(429, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        "retry-after": retryAfter,
      });
      res.end(body);
      return;
    }
    inWindow.push(nowMs);
    accepted++;
    res.writeHead(200, { "content-type": "text/plain", "content-length": 2 });
    res.end("ok");
  };

  const server = await startFakeUpstream({ cert: options.cert, handler });
  return {
    origin: server.origin,
    get arrivals() {
      return arrivals;
    },
    accepted: () => accepted,
    rejected: () => rejected,
    maxInAnyWindow: (w = windowMs) => maxInAnyWindow(arrivals, w),
    reset() {
      arrivals = [];
      inWindow = [];
      accepted = 0;
      rejected = 0;
    },
    server,
    close: () => server.close(),
  };
}

/** The most of `times` that fall within any half-open window [t, t + windowMs). */
export function maxInAnyWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  let first = 0;
  for (let last = 0; last < sorted.length; last++) {
    while (sorted[last]! - sorted[first]! >= windowMs) first++;
    most = Math.max(most, last - first + 1);
  }
  return most;
}
