/**
 * bcrypt password checks, off the event loop and bounded for the whole process
 * (`callers.basic.maxConcurrentChecks`, `maxQueuedChecks`). bcryptjs ran each check on the event
 * loop: ~80 ms of main-thread CPU at cost 10, so a burst of wrong passwords stalled every tenant
 * for seconds (issue 30). `@node-rs/bcrypt` runs the same compare on libuv's thread pool: the
 * event loop spends ~0.5 ms per check. docs/design-notes.md has the measurements and why it was
 * chosen over a worker pool or `bcrypt`.
 *
 * At most `maxConcurrent` checks run at once; the rest wait in one FIFO of `maxQueued`; beyond
 * it `verify` answers "busy" at once (the gate's 503 `caller_checks_busy`). The thread pool also
 * serves DNS lookups and file reads, so one of its threads is always left to them.
 */
import { createRequire } from "node:module";
import bcryptjs from "bcryptjs";

/** Compares a password with a bcrypt hash (`$2a$`, `$2b$`, `$2y$`). */
export type BcryptCompare = (password: string, hash: string) => Promise<boolean>;

/** The limits in force; the latest ones given to `verify` apply to the whole queue. */
export interface PasswordCheckLimits {
  maxConcurrent: number;
  maxQueued: number;
}

export interface PasswordCheckStatus {
  /** Checks running now. */
  running: number;
  /** Checks waiting for a free slot. */
  queued: number;
  /** The limit in force: `maxConcurrentChecks`, at most the thread pool's size less one. */
  maxConcurrent: number;
  maxQueued: number;
  /** Checks started since the process began. */
  started: number;
  /** Where the checks run: `thread-pool` (native), or `event-loop` (bcryptjs fallback). */
  runsOn: "thread-pool" | "event-loop";
}

export interface PasswordChecks {
  /**
   * Whether `password` matches `hash`, once a slot is free; "busy" (synchronously) when
   * `limits.maxConcurrent` checks run and `limits.maxQueued` wait already.
   */
  verify(password: string, hash: string, limits: PasswordCheckLimits): Promise<boolean> | "busy";
  status(): PasswordCheckStatus;
}

export interface PasswordChecksOptions {
  /** Default: {@link loadBcryptCompare}. */
  compare?: BcryptCompare | undefined;
  /** Where `compare` runs, for /status. Default: what {@link loadBcryptCompare} found. */
  runsOn?: PasswordCheckStatus["runsOn"] | undefined;
  /** libuv's thread pool size (`UV_THREADPOOL_SIZE`, 4 when unset). */
  threadPoolSize?: number | undefined;
  /** Called with each check as it starts (metrics). */
  onStart?: (() => void) | undefined;
  /** Told once when the native binding is missing and checks fall back to the event loop. */
  warn?: ((message: string, detail: Record<string, unknown>) => void) | undefined;
}

/** What this room uses of `@node-rs/bcrypt`: its compare on libuv's thread pool. */
export interface NativeBcrypt {
  verify(password: string, hash: string): Promise<boolean>;
}

/** The compare this process uses, and where it runs. */
export interface LoadedCompare {
  compare: BcryptCompare;
  runsOn: PasswordCheckStatus["runsOn"];
  /** Why the native binding was not used, when it was not. */
  fallbackReason?: string;
}

/**
 * `@node-rs/bcrypt` when its binary for this platform is installed (npm installs it as an
 * optional dependency); else bcryptjs on the event loop, as before — slower for everyone under
 * attack, but still bounded by the throttle and the queue.
 */
export function loadBcryptCompare(
  loadNative: () => NativeBcrypt = () =>
    createRequire(import.meta.url)("@node-rs/bcrypt") as NativeBcrypt,
): LoadedCompare {
  try {
    const native = loadNative();
    return { compare: (password, hash) => native.verify(password, hash), runsOn: "thread-pool" };
  } catch (error) {
    return {
      compare: (password, hash) => bcryptjs.compare(password, hash),
      runsOn: "event-loop",
      fallbackReason: (error as { code?: string }).code ?? "the binding did not load",
    };
  }
}

/** libuv's thread pool size as libuv reads it (UV_THREADPOOL_SIZE, 1–1024, default 4). */
export function threadPoolSizeFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const size = Number(env.UV_THREADPOOL_SIZE);
  return Number.isInteger(size) && size > 0 ? Math.min(size, 1024) : 4;
}

interface Waiting {
  password: string;
  hash: string;
  resolve(matches: boolean): void;
  reject(error: unknown): void;
}

export function createPasswordChecks(options: PasswordChecksOptions = {}): PasswordChecks {
  let compare = options.compare;
  let runsOn = options.runsOn ?? "thread-pool";
  if (!compare) {
    const loaded = loadBcryptCompare();
    compare = loaded.compare;
    runsOn = loaded.runsOn;
    if (loaded.fallbackReason) {
      options.warn?.(
        "callers.basic: the native bcrypt binding (@node-rs/bcrypt) could not be loaded; password checks run on the event loop",
        { reason: loaded.fallbackReason },
      );
    }
  }
  const compareWith = compare;
  // One thread stays free for DNS lookups and file reads (the users file poll, CA files).
  const threadCap =
    runsOn === "thread-pool"
      ? Math.max(1, (options.threadPoolSize ?? threadPoolSizeFromEnv()) - 1)
      : Infinity;
  let limits: PasswordCheckLimits = { maxConcurrent: 1, maxQueued: 0 };
  let running = 0;
  let started = 0;
  /** FIFO with a moving head: shift() on a long array is O(n). */
  let queue: Waiting[] = [];
  let head = 0;

  const maxRunning = () => Math.max(1, Math.min(limits.maxConcurrent, threadCap));

  function start(job: Waiting): void {
    running += 1;
    started += 1;
    options.onStart?.();
    let result: Promise<boolean>;
    try {
      result = compareWith(job.password, job.hash);
    } catch (error) {
      result = Promise.reject(error);
    }
    // The slot is free (and the next check started) before the waiter hears its answer.
    const finish = () => {
      running -= 1;
      drain();
    };
    result.then(
      (matches) => {
        finish();
        job.resolve(matches);
      },
      (error: unknown) => {
        finish();
        job.reject(error);
      },
    );
  }

  function drain(): void {
    while (running < maxRunning() && head < queue.length) {
      const next = queue[head]!;
      queue[head] = undefined as unknown as Waiting; // let the password go
      head += 1;
      start(next);
    }
    if (head === queue.length) {
      queue = [];
      head = 0;
    } else if (head > 1024 && head * 2 > queue.length) {
      queue = queue.slice(head);
      head = 0;
    }
  }

  return {
    verify(password, hash, given) {
      limits = given;
      const waiting = queue.length - head;
      if (running >= maxRunning() && waiting >= limits.maxQueued) return "busy";
      return new Promise<boolean>((resolve, reject) => {
        queue.push({ password, hash, resolve, reject });
        drain();
      });
    },
    status: () => ({
      running,
      queued: queue.length - head,
      maxConcurrent: maxRunning(),
      maxQueued: limits.maxQueued,
      started,
      runsOn,
    }),
  };
}
