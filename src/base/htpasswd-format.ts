/**
 * The htpasswd format as `callers.basic.usersFile` takes it: `user:hash` lines of bcrypt hashes,
 * blank lines and `#` comments skipped. Config validation reads the file with this at start, the
 * callers room (callers/htpasswd.ts, the users in force) when it changes. Only bcrypt is accepted: the other
 * htpasswd formats (MD5-crypt `$apr1$`, SHA-1 `{SHA}`, crypt) are fast to brute-force once the
 * file leaks. Problems name the file, line and user, never a hash.
 */

/**
 * `$2y$` (what `htpasswd -B` writes), `$2a$` and `$2b$` with a two-digit cost and 53 characters
 * of salt and hash in bcrypt's base64. @node-rs/bcrypt and bcryptjs 3 compare all three prefixes
 * as they are and agree on every password (test/callers/password-checks.test.ts), so no prefix
 * is rewritten.
 */
const BCRYPT_HASH = /^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$/;
/** The lowest bcrypt cost accepted (and the cost an unknown user's check starts from). */
export const BCRYPT_MIN_COST = 4;
const MAX_COST = 31;

/** The users of an htpasswd text and what is wrong with it (empty when nothing is). */
export interface ParsedHtpasswd {
  /** user → bcrypt hash. */
  users: Map<string, string>;
  /** One line per problem: `<fileName> line <n>: …`; never contains a hash. */
  problems: string[];
}

/** Parse htpasswd text: `user:hash` lines; blank lines and `#` comments are skipped. */
export function parseHtpasswd(text: string, fileName: string): ParsedHtpasswd {
  const users = new Map<string, string>();
  const firstLine = new Map<string, number>();
  const problems: string[] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, index) => {
    const n = index + 1;
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const colon = line.indexOf(":");
    if (colon <= 0) {
      problems.push(`${fileName} line ${n}: expected user:hash`);
      return;
    }
    const user = line.slice(0, colon);
    const hash = line.slice(colon + 1);
    const match = BCRYPT_HASH.exec(hash);
    if (!match) {
      problems.push(
        `${fileName} line ${n}: user ${JSON.stringify(user)} has no bcrypt hash ($2y$, $2a$ or $2b$; create it with htpasswd -B)`,
      );
      return;
    }
    const cost = Number(match[1]);
    if (cost < BCRYPT_MIN_COST || cost > MAX_COST) {
      problems.push(
        `${fileName} line ${n}: user ${JSON.stringify(user)} has bcrypt cost ${cost}, expected 4 to 31`,
      );
      return;
    }
    const earlier = firstLine.get(user);
    if (earlier !== undefined) {
      // Which of two entries wins is a guess; say so rather than pick one.
      problems.push(
        `${fileName} line ${n}: user ${JSON.stringify(user)} is already on line ${earlier}`,
      );
      return;
    }
    firstLine.set(user, n);
    users.set(user, hash);
  });
  if (users.size === 0 && problems.length === 0) {
    problems.push(
      `${fileName}: defines no user (expected user:hash lines; an empty or comment-only file would refuse every Basic caller)`,
    );
  }
  return { users, problems };
}
