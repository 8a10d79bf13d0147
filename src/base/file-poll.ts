/**
 * Following files that change under a running process: secret and key files, the htpasswd
 * users, a cluster JWKS, a rotated client certificate. Kubernetes Secret and ConfigMap volumes
 * swap a `..data` symlink instead of rewriting the file, which fs.watch on the file misses (it
 * watches the old inode); stat() of the path follows the symlink, so a changed stat signature
 * tells both that and a plain rewrite. One poller for every room: what a change means (read
 * the text, rebuild a connector, re-read credentials) and what a failure means stay with each
 * caller.
 *
 * The config file is not followed here: reload/config-watcher.ts watches its folder for events
 * and compares content hashes, so a reload follows an edit within its debounce, not a poll.
 */
import { type Stats, statSync } from "node:fs";
import { stat } from "./async-fs.js";
import { type Clock, systemClock } from "./clock.js";

/**
 * What stat() says of `paths`, as one string: device, inode, size, mtime and ctime of each.
 * Rejects with the first fs error (a file missing mid-swap, unreadable).
 */
export async function statSignature(paths: readonly string[]): Promise<string> {
  const stats = await Promise.all(paths.map((path) => stat(path)));
  return stats.map(signatureOf).join("|");
}

/** {@link statSignature} without waiting: for a check on the connect path, and at start. */
export function statSignatureSync(paths: readonly string[]): string {
  return paths.map((path) => signatureOf(statSync(path))).join("|");
}

export interface FilePollOptions {
  paths: readonly string[];
  /** The signature the caller read under at start; undefined: the first check is a change. */
  initialSignature?: string | undefined;
  /** How often to stat; 0 disables polling (check() still works). */
  pollIntervalMs: number;
  /** Timers of the poll; default the system clock's (unref'd: a poll never keeps a process up). */
  timers?: Pick<Clock, "setTimeout" | "clearTimeout"> | undefined;
  /**
   * The files changed to `signature`. Throw (or reject) to say the change could not be taken
   * (the file could not be read): it counts as a failure, and the next check tries again. A
   * change taken but found wrong (a file that does not parse) is the caller's to report: return,
   * and it is not offered again until the files change once more.
   */
  onChange(signature: string): void | Promise<void>;
  /**
   * Told once per distinct failure (the fs error's code, or the error's), not at every poll:
   * the caller keeps what is in force and may say so.
   */
  onError?: ((error: unknown) => void) | undefined;
}

export interface FilePoll {
  /** Stat the files now and, if they changed, call onChange (concurrent calls share one check). */
  check(): Promise<void>;
  /**
   * The caller read the files under `signature` on its own (a read between polls): the next
   * check compares with it, so one change is reported once.
   */
  seen(signature: string): void;
  close(): void;
}

/** Polls `paths` every `pollIntervalMs` until closed; nothing is polled when there are none. */
export function pollFiles(options: FilePollOptions): FilePoll {
  const { paths, pollIntervalMs } = options;
  const timers = options.timers ?? systemClock;
  /** The signature last seen, or `error:<code>` while failing. */
  let last = options.initialSignature;
  let checking: Promise<void> | undefined;
  let timer: unknown;
  let closed = false;

  function fail(error: unknown): void {
    const state = `error:${(error as { code?: string } | undefined)?.code ?? "error"}`;
    if (last === state) return;
    last = state;
    if (!closed) options.onError?.(error);
  }

  async function checkOnce(): Promise<void> {
    if (paths.length === 0) return;
    let current: string;
    try {
      current = await statSignature(paths);
    } catch (error) {
      fail(error);
      return;
    }
    if (current === last || closed) return;
    const before = last;
    try {
      await options.onChange(current);
    } catch (error) {
      // Not taken: the next check sees a change again and retries; told once while it fails.
      fail(error);
      return;
    }
    // Stat came before the caller's read, so a write between the two is one more change next
    // time; a read the caller recorded itself meanwhile (seen) is newer and stays.
    if (last === before) last = current;
  }

  function check(): Promise<void> {
    checking ??= checkOnce().finally(() => {
      checking = undefined;
    });
    return checking;
  }

  function schedule(): void {
    if (closed || pollIntervalMs <= 0 || paths.length === 0) return;
    timer = timers.setTimeout(() => {
      timer = undefined;
      void check().finally(schedule);
    }, pollIntervalMs);
  }
  schedule();

  return {
    check,
    seen(signature) {
      last = signature;
    },
    close() {
      closed = true;
      if (timer !== undefined) timers.clearTimeout(timer);
      timer = undefined;
    },
  };
}

function signatureOf(s: Stats): string {
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
}
