/**
 * `bearer-proxy wait`: poll the admin listener's /readyz until it answers 200, for apps that must
 * not start before their sidecar (an entrypoint runs `bearer-proxy wait && exec app`). Exit 0 when
 * ready, 1 on timeout with the last answer on stderr so the operator sees why.
 */

import { errorMessage } from "../errors.js";
import { Agent, request } from "../net/undici-core.js";

export interface WaitArgs {
  /** Admin base URL; default http://127.0.0.1:9901. */
  adminUrl: string;
  /** Give up after this long. */
  timeoutMs: number;
  /** Pause between polls. Default 250 ms. */
  intervalMs?: number;
  /** Where the timeout message goes; default process.stderr. */
  stderr?: NodeJS.WritableStream;
}

export const DEFAULT_ADMIN_URL = "http://127.0.0.1:9901";
const DEFAULT_INTERVAL_MS = 250;
/** One poll never waits longer than this, so a hung admin port cannot eat the whole timeout. */
const MAX_POLL_MS = 2_000;

/** Poll /readyz; resolves with the exit code (0 ready, 1 timeout or bad URL). */
export async function runWait(args: WaitArgs): Promise<number> {
  const stderr = args.stderr ?? process.stderr;
  const intervalMs = args.intervalMs ?? DEFAULT_INTERVAL_MS;
  let readyzUrl: URL;
  try {
    readyzUrl = new URL("readyz", withTrailingSlash(args.adminUrl || DEFAULT_ADMIN_URL));
    if (readyzUrl.protocol !== "http:" && readyzUrl.protocol !== "https:") throw new TypeError();
  } catch {
    stderr.write(
      `bearer-proxy wait: --admin must be an http:// URL, got ${JSON.stringify(args.adminUrl)}\n`,
    );
    return 1;
  }

  // Own short-lived agent: no keep-alive pool left behind when the command returns.
  const agent = new Agent({ keepAliveTimeout: 1, connections: 1 });
  const deadline = performance.now() + args.timeoutMs;
  let last = "no answer yet";
  let answered = false;
  try {
    for (;;) {
      const remainingMs = deadline - performance.now();
      if (remainingMs <= 0) break;
      const outcome = await pollOnce(readyzUrl, agent, Math.min(MAX_POLL_MS, remainingMs));
      if (outcome.ready) return 0;
      // A poll cut short by the deadline says nothing new; keep the last real answer.
      if (!(outcome.timedOut && answered)) last = outcome.description;
      answered ||= !outcome.timedOut;
      const pauseMs = Math.min(intervalMs, deadline - performance.now());
      if (pauseMs <= 0) break;
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  } finally {
    await agent.close().catch(() => {});
  }
  stderr.write(
    `bearer-proxy wait: ${readyzUrl.href} not ready after ${formatMs(args.timeoutMs)}; last answer: ${last}\n`,
  );
  return 1;
}

async function pollOnce(
  url: URL,
  agent: InstanceType<typeof Agent>,
  timeoutMs: number,
): Promise<{ ready: true } | { ready: false; timedOut: boolean; description: string }> {
  try {
    const response = await request(url, {
      method: "GET",
      dispatcher: agent,
      headers: { accept: "application/json" },
      // AbortSignal.timeout wants a whole, positive number of ms.
      signal: AbortSignal.timeout(Math.max(1, Math.ceil(timeoutMs))),
    });
    const text = await response.body.text();
    if (response.statusCode === 200) return { ready: true };
    return {
      ready: false,
      timedOut: false,
      description: `${response.statusCode} ${summarizeReadyz(text)}`,
    };
  } catch (error) {
    const timedOut =
      error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
    return {
      ready: false,
      timedOut,
      description: timedOut ? `no answer within ${Math.round(timeoutMs)} ms` : describeError(error),
    };
  }
}

/** The gist of a /readyz body: its status and each not-ready upstream with its reason. */
export function summarizeReadyz(text: string): string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return text.length > 200 ? `${text.slice(0, 200)}…` : text;
  }
  if (typeof body !== "object" || body === null) return String(body);
  const { status, upstreams } = body as { status?: unknown; upstreams?: unknown };
  const parts: string[] = [String(status ?? "unknown")];
  if (Array.isArray(upstreams)) {
    for (const u of upstreams as {
      name?: unknown;
      ready?: unknown;
      state?: unknown;
      reason?: unknown;
      lastError?: { code?: unknown; message?: unknown };
    }[]) {
      if (u.ready !== false) continue;
      const error = u.lastError
        ? ` (${String(u.lastError.code)}: ${String(u.lastError.message)})`
        : "";
      parts.push(`upstream ${String(u.name)} ${String(u.state)}: ${String(u.reason)}${error}`);
    }
  }
  return parts.join("; ");
}

function describeError(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  const message = errorMessage(error);
  return typeof code === "string" && !message.includes(code) ? `${code}: ${message}` : message;
}

function withTrailingSlash(url: string): string {
  return url.endsWith("/") ? url : `${url}/`;
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
