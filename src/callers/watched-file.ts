/**
 * A small file the callers room trusts (htpasswd users, a cluster JWKS), read at start and
 * re-read when it changes. Kubernetes Secret and ConfigMap volumes swap a `..data` symlink
 * instead of rewriting the file, which fs.watch on the file misses (it watches the old inode);
 * polling stat() of the path, which follows the symlink, sees both that and plain rewrites
 * (the same choice as token/secret-reader.ts).
 */
import { readFileSync, type Stats, statSync } from "node:fs";
import { readFile, stat } from "node:fs/promises";

/** How often a watched file is stat()ed by default: a revoked user loses access within ~1 s. */
export const DEFAULT_CALLERS_POLL_INTERVAL_MS = 1_000;

export interface WatchedFileOptions {
  file: string;
  /** The content as read at start (see {@link readWatchedFileSync}), so nothing is read twice. */
  initial: WatchedFileContent;
  /** Called with the new text after the file changed; throw to reject it (it is not retried). */
  onChange(text: string): void;
  /** Called when the changed file cannot be read; the previous content stays in force. */
  onError(error: unknown): void;
  /** 0 disables polling (check() still works). Default {@link DEFAULT_CALLERS_POLL_INTERVAL_MS}. */
  pollIntervalMs?: number | undefined;
}

/** A file's text and the stat() signature it was read under. */
export interface WatchedFileContent {
  text: string;
  signature: string;
}

export interface WatchedFile {
  /** Stat the file now and, if it changed, re-read it (concurrent calls share one check). */
  check(): Promise<void>;
  close(): void;
}

/** Read a file at start; throws the fs error (the caller turns it into a config problem). */
export function readWatchedFileSync(file: string): WatchedFileContent {
  const signature = signatureOf(statSync(file));
  return { text: readFileSync(file, "utf8"), signature };
}

/** Poll `file` until closed; the timer is unref'd so it never keeps the process alive. */
export function watchFile(options: WatchedFileOptions): WatchedFile {
  const pollIntervalMs = options.pollIntervalMs ?? DEFAULT_CALLERS_POLL_INTERVAL_MS;
  let signature = options.initial.signature;
  let checking: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  async function checkOnce(): Promise<void> {
    let text: string;
    let current: string;
    try {
      current = signatureOf(await stat(options.file));
      if (current === signature) return;
      text = await readFile(options.file, "utf8");
    } catch (error) {
      // Missing mid-swap or unreadable: keep what is in force, say so once per distinct failure.
      const code = (error as { code?: string }).code ?? "error";
      if (signature !== `error:${code}`) {
        signature = `error:${code}`;
        if (!closed) options.onError(error);
      }
      return;
    }
    // Remember the signature before parsing: a bad file is reported once, not every second.
    // Stat came before the read, so a write between the two shows as one more change next time.
    signature = current;
    if (closed) return;
    try {
      options.onChange(text);
    } catch (error) {
      options.onError(error);
    }
  }

  function check(): Promise<void> {
    checking ??= checkOnce().finally(() => {
      checking = undefined;
    });
    return checking;
  }

  function schedule(): void {
    if (closed || pollIntervalMs <= 0) return;
    timer = setTimeout(() => {
      timer = undefined;
      void check().finally(schedule);
    }, pollIntervalMs);
    timer.unref();
  }
  schedule();

  return {
    check,
    close() {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
  };
}

function signatureOf(s: Stats): string {
  return `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
}
