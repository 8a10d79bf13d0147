import { readdirSync } from "node:fs";
import type { IncomingHttpHeaders } from "node:http";
import { type Dispatcher, request } from "undici";
import type { TokenFaultHandler } from "../../../src/emulator/emulator-types.js";
import { sleep } from "../../helpers/wait.js";

/**
 * Client side of the hardening tests: one request through the proxy with everything a test
 * asserts on (status, headers, body, timing), a constant-load loop, a recorder for token
 * requests that hit a fault handler (waiting itself is test/helpers/wait.ts).
 */

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
  /** The `bearer-proxy-error` header, if the proxy answered itself. */
  code: string | undefined;
  startMs: number;
  endMs: number;
}

/** One request; a transport failure (connection reset by the proxy) becomes status 0. */
export async function send(
  url: string,
  options: {
    method?: string;
    body?: string;
    dispatcher?: Dispatcher;
    headers?: Record<string, string>;
  } = {},
): Promise<Answer> {
  const startMs = Date.now();
  try {
    const response = await request(url, {
      method: (options.method ?? "GET") as "GET",
      ...(options.body === undefined ? {} : { body: options.body }),
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : { reset: true }),
      ...(options.headers ? { headers: options.headers } : {}),
    });
    const text = await response.body.text();
    const code = response.headers["bearer-proxy-error"];
    return {
      status: response.statusCode,
      headers: response.headers,
      text,
      code: typeof code === "string" ? code : undefined,
      startMs,
      endMs: Date.now(),
    };
  } catch (error) {
    return {
      status: 0,
      headers: {},
      text: String((error as Error).message),
      code: `transport:${(error as { code?: string }).code ?? "error"}`,
      startMs,
      endMs: Date.now(),
    };
  }
}

/** Parsed JSON error body of a proxy answer. */
export function errorBody(answer: Answer): { code: string; message: string; upstream?: string } {
  return (
    JSON.parse(answer.text) as { error: { code: string; message: string; upstream?: string } }
  ).error;
}

export interface LoadOptions {
  /** Absolute URLs, used round-robin. */
  urls: readonly string[];
  concurrency: number;
  dispatcher: Dispatcher;
  /** Stop when this resolves or the duration passes. */
  durationMs: number;
  /** Pause between two requests of one worker. Default 0. */
  pauseMs?: number;
}

/** Constant load: `concurrency` workers sending back to back until the duration passes. */
export async function runLoad(options: LoadOptions): Promise<Answer[]> {
  const answers: Answer[] = [];
  const endAtMs = Date.now() + options.durationMs;
  let next = 0;
  const worker = async () => {
    while (Date.now() < endAtMs) {
      const url = options.urls[next++ % options.urls.length]!;
      answers.push(await send(url, { dispatcher: options.dispatcher }));
      if (options.pauseMs) await sleep(options.pauseMs);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  return answers;
}

/**
 * Load in rounds (`round` runs one) until `enough` holds for all answers so far, or `capMs` has
 * passed: how many requests fit in a second is the machine's business, what the test counts is
 * the proxy's. A count that is never reached still fails the test's own assertion, after the cap.
 */
export async function loadUntil(
  round: () => Promise<Answer[]>,
  enough: (answers: readonly Answer[]) => boolean,
  capMs: number,
): Promise<Answer[]> {
  const answers: Answer[] = [];
  const giveUpAtMs = Date.now() + capMs;
  while (!enough(answers) && Date.now() < giveUpAtMs) answers.push(...(await round()));
  return answers;
}

/** Wraps a fault handler to record when each token request arrived. */
export function recordingFault(
  handler: TokenFaultHandler,
): TokenFaultHandler & { times: number[] } {
  const times: number[] = [];
  const wrapped = ((req, res) => {
    times.push(Date.now());
    handler(req, res);
  }) as TokenFaultHandler & { times: number[] };
  wrapped.times = times;
  return wrapped;
}

/** The most timestamps falling in any window of `windowMs`. */
export function maxInWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  let start = 0;
  for (let end = 0; end < sorted.length; end++) {
    while (sorted[end]! - sorted[start]! >= windowMs) start++;
    best = Math.max(best, end - start + 1);
  }
  return best;
}

/** Open file descriptors of this process (sockets included). */
export function openFds(): number {
  return readdirSync("/proc/self/fd").length;
}
