import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { resolve } from "node:path";
import { maxInAnyWindow } from "../../helpers/limited-upstream.js";
import type { ServerCertificate } from "../../helpers/tls.js";

/**
 * test/helpers/limited-upstream.ts's upstream (at most `limit` in any rolling window, 429 with
 * Retry-After beyond) run in a child process, as a real upstream is: arrivals are timed on its
 * own event loop. In-process, the proxy's and the client's work on a burst delays the
 * upstream's reads of the first requests by tens of ms under a loaded suite, which bunches
 * arrivals that left the pacer evenly spaced.
 */
export interface UpstreamProcess {
  origin: string;
  /** Arrival times (the child's performance.now ms), accepted and rejected counts. */
  stats(): Promise<{ arrivals: number[]; accepted: number; rejected: number }>;
  /** The most requests that arrived within any window of `windowMs` (default the limit's). */
  maxInAnyWindow(windowMs?: number): Promise<number>;
  /** Forget arrivals, counts and the limit's memory. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

const CHILD = resolve(import.meta.dirname, "limited-upstream-child.mjs");

export async function startUpstreamProcess(options: {
  cert: ServerCertificate;
  limit: number;
  windowMs?: number;
}): Promise<UpstreamProcess> {
  const windowMs = options.windowMs ?? 1_000;
  const child: ChildProcess = fork(CHILD, [], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  // One question at a time: each answer is the next message.
  let queue: Promise<unknown> = Promise.resolve();
  const ask = <T>(message: object): Promise<T> => {
    const answer = queue.then(async () => {
      const reply = once(child, "message");
      child.send(message);
      return (await reply)[0] as T;
    });
    queue = answer.catch(() => {});
    return answer;
  };
  const { port } = await ask<{ port: number }>({
    cmd: "start",
    certPem: options.cert.certPem,
    keyPem: options.cert.keyPem,
    limit: options.limit,
    windowMs,
  });
  const stats = () =>
    ask<{ arrivals: number[]; accepted: number; rejected: number }>({ cmd: "stats" });
  return {
    origin: `https://127.0.0.1:${port}`,
    stats,
    maxInAnyWindow: async (w = windowMs) => maxInAnyWindow((await stats()).arrivals, w),
    reset: async () => {
      await ask({ cmd: "reset" });
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGKILL");
      await exited;
    },
  };
}
