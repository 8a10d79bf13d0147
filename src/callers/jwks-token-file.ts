/**
 * The bearer token a `jwksUri` fetch presents (`callers.kubernetes.jwksTokenFile`). The API
 * server's `/openid/v1/jwks` is readable by the ClusterRole
 * `system:service-account-issuer-discovery`, which Kubernetes binds to authenticated service
 * accounts (group `system:serviceaccounts`), not to anonymous clients: the fetch must present a
 * service-account token. Projected tokens are rewritten by the kubelet (at 80 % of their
 * lifetime, hourly for the default one), so the file is read again at every fetch; fetches are
 * rare (jose's cooldown and max age), and the file is a few hundred bytes.
 *
 * The token is a secret: it appears nowhere but in the request's `Authorization` header. Logs
 * name the file and, at most, the token's fingerprint.
 */
import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import { readFile } from "../base/async-fs.js";
import { parseBearerTokenFile } from "../base/bearer-token.js";
import { fingerprint } from "../base/fingerprint.js";
import { ConfigError } from "../errors.js";

const FIELD = "callers.kubernetes.jwksTokenFile";

export interface JwksTokenFile {
  /** The token to send now: the file as it reads now, or the last good token if it can't be. */
  read(): Promise<string>;
}

/**
 * Read `file` now (a missing, empty or malformed file is a ConfigError naming the field), then
 * again at every `read()`. A later read that fails keeps the last good token and warns once,
 * until the file reads well again.
 */
export function openJwksTokenFile(
  file: string,
  logger?: Pick<Logger, "warn" | "info"> | undefined,
): JwksTokenFile {
  let token: string;
  try {
    token = tokenOf(readFileSync(file, "utf8"));
  } catch (error) {
    throw new ConfigError([{ path: FIELD, message: `${problemOf(error)} (${file})` }]);
  }
  let failing = false;

  return {
    async read() {
      try {
        token = tokenOf(await readFile(file, "utf8"));
      } catch (error) {
        if (!failing) {
          failing = true;
          logger?.warn(
            { file, problem: problemOf(error), fingerprint: fingerprint(token) },
            `${FIELD} cannot be read; the JWKS fetch keeps sending the token last read`,
          );
        }
        return token;
      }
      if (failing) {
        failing = false;
        logger?.info({ file, fingerprint: fingerprint(token) }, `${FIELD} is readable again`);
      }
      return token;
    },
  };
}

function tokenOf(text: string): string {
  const parsed = parseBearerTokenFile(text);
  if (!parsed.ok) throw new Error(`expected a bearer token, ${parsed.problem}`);
  return parsed.token;
}

function problemOf(error: unknown): string {
  const code = (error as { code?: string }).code;
  if (code === "ENOENT") return "expected a readable token file, found no such file";
  if (code !== undefined) return `expected a readable token file, found it unreadable (${code})`;
  return (error as Error).message;
}
