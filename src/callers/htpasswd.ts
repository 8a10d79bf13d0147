/**
 * `callers.basic.usersFile`: an htpasswd file of bcrypt users, re-read when it changes.
 * Only bcrypt is accepted: the other htpasswd formats (MD5-crypt `$apr1$`, SHA-1 `{SHA}`, crypt)
 * are fast to brute-force once the file leaks. A file that defines no user (empty, or comments
 * only) is refused like an invalid one: at start, and when it becomes so while running (a
 * truncated file must not lock every caller out). Messages name the file, line and user, never
 * a hash.
 */
import bcrypt from "bcryptjs";
import type { Logger } from "pino";
import { BCRYPT_MIN_COST, parseHtpasswd } from "../base/htpasswd-format.js";
import { ConfigError } from "../errors.js";
import {
  createPasswordChecks,
  type PasswordCheckLimits,
  type PasswordChecks,
} from "./password-checks.js";
import { readWatchedFileSync, type WatchedFile, watchFile } from "./watched-file.js";

/** What /status shows of the users file. */
export interface UsersFileStatus {
  file: string;
  /** Users in force. */
  users: number;
  /** Successful reloads since start. */
  generation: number;
  /** True while the file on disk is not what is in force (invalid, empty or unreadable). */
  stale: boolean;
  /** Since when (ISO time), while stale. */
  staleSince?: string;
  /** Why, while stale: the first problem or the read error's code; never a hash. */
  problem?: string;
}

/** The users of an htpasswd file, as last read successfully. */
export interface HtpasswdUsers {
  /** Increments on each successful reload: results verified under an older one are stale. */
  readonly generation: number;
  /** How many users are in force. */
  readonly size: number;
  has(user: string): boolean;
  /**
   * Whether `password` is the user's. An unknown user costs one bcrypt compare too, so timing
   * does not tell whether a user exists. The compare runs off the event loop once a check slot
   * is free; "busy" when the process's check queue is full (nothing was compared).
   */
  verify(user: string, password: string): Promise<boolean | "busy">;
  status(): UsersFileStatus;
  /** Stat the file now and reload it if it changed (the poll does this every interval). */
  check(): Promise<void>;
  close(): void;
}

export interface HtpasswdUsersOptions {
  file: string;
  logger?: Pick<Logger, "warn" | "info"> | undefined;
  /** How often the file is stat()ed; 0 disables polling. Default 1000. */
  pollIntervalMs?: number | undefined;
  /** Config path shown in start-up errors. Default "callers.basic.usersFile". */
  configPath?: string | undefined;
  /** The process's password check queue. Default: one of its own. */
  checks?: PasswordChecks | undefined;
  /** `callers.basic.maxConcurrentChecks` / `maxQueuedChecks`. Default 1 and 100. */
  limits?: PasswordCheckLimits | undefined;
  /** Wall clock for `staleSince`. Default Date.now. */
  now?: (() => number) | undefined;
}

/**
 * Read the htpasswd file now (a missing or invalid file throws a ConfigError listing every
 * problem) and re-read it when it changes. A changed file that is unreadable or has any problem
 * is not applied: the last good users stay in force and a warning (without hashes) is logged,
 * so a half-written edit neither locks everyone out nor lets a mistyped line through.
 */
export function createHtpasswdUsers(options: HtpasswdUsersOptions): HtpasswdUsers {
  const { file, logger } = options;
  const configPath = options.configPath ?? "callers.basic.usersFile";
  let initial: ReturnType<typeof readWatchedFileSync>;
  try {
    initial = readWatchedFileSync(file);
  } catch (error) {
    const code = (error as { code?: string }).code ?? "error";
    throw new ConfigError([{ path: configPath, message: `cannot read ${file} (${code})` }]);
  }
  const parsed = parseHtpasswd(initial.text, file);
  if (parsed.problems.length > 0) {
    throw new ConfigError(parsed.problems.map((message) => ({ path: configPath, message })));
  }
  let users = parsed.users;
  let dummyHash = dummyHashFor(users);
  let generation = 0;
  let stale: { since: string; problem: string } | undefined;
  const now = options.now ?? Date.now;
  const checks = options.checks ?? createPasswordChecks({ warn: (m, d) => logger?.warn(d, m) });
  const limits = options.limits ?? { maxConcurrent: 1, maxQueued: 100 };
  const markStale = (problem: string) => {
    stale = { since: stale?.since ?? new Date(now()).toISOString(), problem };
  };

  const watched: WatchedFile = watchFile({
    file,
    initial,
    pollIntervalMs: options.pollIntervalMs,
    onChange(text) {
      const next = parseHtpasswd(text, file);
      if (next.problems.length > 0) {
        markStale(next.problems[0]!);
        logger?.warn(
          { file, problems: next.problems, usersInForce: users.size },
          "callers.basic users file changed but is invalid or defines no user; keeping the users last loaded",
        );
        return;
      }
      users = next.users;
      dummyHash = dummyHashFor(users);
      generation += 1;
      stale = undefined;
      logger?.info({ file, users: users.size, generation }, "callers.basic users file reloaded");
    },
    onError(error) {
      const code = (error as { code?: string }).code ?? "error";
      markStale(`cannot read ${file} (${code})`);
      logger?.warn(
        { file, code },
        "callers.basic users file cannot be read; keeping the users last loaded",
      );
    },
  });

  return {
    get generation() {
      return generation;
    },
    get size() {
      return users.size;
    },
    has: (user) => users.has(user),
    async verify(user, password) {
      const hash = users.get(user);
      const matches = await checks.verify(password, hash ?? dummyHash, limits);
      return hash === undefined && matches !== "busy" ? false : matches;
    },
    status: () => ({
      file,
      users: users.size,
      generation,
      stale: stale !== undefined,
      ...(stale ? { staleSince: stale.since, problem: stale.problem } : {}),
    }),
    check: () => watched.check(),
    close: () => watched.close(),
  };
}

/**
 * What an unknown user is compared against: a fresh salt at the file's highest cost plus a
 * placeholder hash part. bcrypt runs the full key schedule before comparing, so an unknown
 * user costs as long as a known one; whatever the compare says is ignored.
 */
function dummyHashFor(users: ReadonlyMap<string, string>): string {
  let cost = 10;
  if (users.size > 0) {
    cost = BCRYPT_MIN_COST;
    for (const hash of users.values()) cost = Math.max(cost, Number(hash.slice(4, 6)));
  }
  return `${bcrypt.genSaltSync(cost)}${".".repeat(31)}`;
}
