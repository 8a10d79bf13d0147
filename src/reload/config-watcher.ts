/**
 * Tells when the configuration should be loaded again: on SIGHUP, and when the config file
 * changes. The file's *directory* is watched, not the file: a Kubernetes ConfigMap volume
 * updates by swapping a `..data` symlink (the file itself is never written), and editors save by
 * renaming a new file over the old one — a watch on the file would follow the old inode and go
 * quiet. A change is recognised by the file's content hash, so unrelated files in the folder,
 * touch-only events and the several events of one save cause no reload, or one.
 */
import { createHash } from "node:crypto";
import { type FSWatcher, watch } from "node:fs";
import { dirname } from "node:path";
import { readFile } from "../base/async-fs.js";

export type ReloadTrigger = "SIGHUP" | "file";

export interface ConfigWatcherOptions {
  /** The config file; without one only SIGHUP triggers. */
  file: string | undefined;
  /** Called once per distinct change (never concurrently: a change during a call waits for it). */
  onChange(trigger: ReloadTrigger): Promise<void>;
  /** Quiet time after the last file event before the file is read. Default 200 ms. */
  debounceMs?: number;
  /** Listen for SIGHUP on `process` (the CLI does; tests may not). Default true. */
  handleSignal?: boolean;
  /** Reports a watch that could not be set up (the folder is gone, too many watches). */
  onWatchError?(error: Error): void;
}

export interface ConfigWatcher {
  /** Re-check now, as SIGHUP does. */
  trigger(trigger: ReloadTrigger): Promise<void>;
  close(): void;
}

async function contentHash(file: string): Promise<string | undefined> {
  try {
    return createHash("sha256")
      .update(await readFile(file))
      .digest("hex");
  } catch {
    // Mid-swap the file can be missing for an instant: the next event reads it again.
    return undefined;
  }
}

/**
 * Starts watching. The current content is the baseline: only a different content (or SIGHUP,
 * which always reloads — an operator may have changed a referenced file or the environment)
 * calls `onChange`.
 */
export async function watchConfig(options: ConfigWatcherOptions): Promise<ConfigWatcher> {
  const debounceMs = options.debounceMs ?? 200;
  let lastHash = options.file ? await contentHash(options.file) : undefined;
  let running: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const run = (trigger: ReloadTrigger): Promise<void> => {
    // Serialised: a reload never overlaps another.
    running = running.then(async () => {
      if (closed) return;
      if (trigger === "file") {
        const hash = await contentHash(options.file!);
        if (hash === undefined || hash === lastHash) return;
        lastHash = hash;
      } else if (options.file) {
        lastHash = (await contentHash(options.file)) ?? lastHash;
      }
      await options.onChange(trigger).catch(() => {});
    });
    return running;
  };

  let watcher: FSWatcher | undefined;
  if (options.file) {
    try {
      watcher = watch(dirname(options.file), { persistent: false }, () => {
        if (timer) clearTimeout(timer);
        timer = setTimeout(() => void run("file"), debounceMs);
        timer.unref();
      });
      watcher.on("error", (error) => options.onWatchError?.(error));
    } catch (error) {
      options.onWatchError?.(error as Error);
    }
  }

  const onSignal = () => void run("SIGHUP");
  const handleSignal = options.handleSignal ?? true;
  if (handleSignal) process.on("SIGHUP", onSignal);

  return {
    trigger: run,
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      watcher?.close();
      if (handleSignal) process.off("SIGHUP", onSignal);
    },
  };
}
