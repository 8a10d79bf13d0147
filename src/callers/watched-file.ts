/**
 * A small file the callers room trusts (htpasswd users, a cluster JWKS), read at start and
 * re-read when it changes: the house's one file poll (base/file-poll.ts, which follows
 * Kubernetes' `..data` symlink swaps), plus reading the text and handing it over.
 */
import { readFileSync } from "node:fs";
import { readFile } from "../base/async-fs.js";
import { pollFiles, statSignatureSync } from "../base/file-poll.js";

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
  const signature = statSignatureSync([file]);
  return { text: readFileSync(file, "utf8"), signature };
}

/** Poll `file` until closed (base/file-poll.ts); the poll never keeps the process alive. */
export function watchFile(options: WatchedFileOptions): WatchedFile {
  let closed = false;
  const poll = pollFiles({
    paths: [options.file],
    initialSignature: options.initial.signature,
    pollIntervalMs: options.pollIntervalMs ?? DEFAULT_CALLERS_POLL_INTERVAL_MS,
    async onChange() {
      // Unreadable (missing mid-swap): the poll reports it once per distinct failure and tries
      // again next time; what is in force stays.
      const text = await readFile(options.file, "utf8");
      if (closed) return;
      try {
        options.onChange(text);
      } catch (error) {
        // A bad file is reported once: the poll remembers its signature all the same.
        options.onError(error);
      }
    },
    onError: options.onError,
  });
  return {
    check: () => poll.check(),
    close() {
      closed = true;
      poll.close();
    },
  };
}
