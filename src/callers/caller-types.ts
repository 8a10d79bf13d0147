/**
 * The shapes shared by the caller room: who is asking (`Caller`), the outcome of reading a
 * credential (`Authentication`), and (re-exported from config/proxy-config.ts) the config each identity
 * source and the allow rules take. Identity sources (htpasswd users, service-account tokens)
 * return these; `allow.ts` decides on them. Nothing here knows HTTP.
 */
import type { UsersFileStatus } from "./htpasswd.js";
import type { PasswordCheckStatus } from "./password-checks.js";

/** Who is asking, once a credential has been verified. */
export type Caller =
  | { kind: "user"; name: string }
  | { kind: "serviceAccount"; namespace: string; name: string };

/**
 * Why a credential was not accepted. `keys_unavailable` and `checks_busy` are no fault of the
 * caller's: the cluster's signing keys could not be loaded, or the process's password check queue
 * was full, so the credential was not checked at all.
 */
export type AuthenticationFailureReason =
  | "malformed"
  | "unsupported_scheme"
  | "unknown_user"
  | "bad_password"
  | "invalid_token"
  | "keys_unavailable"
  | "checks_busy"
  | "not_configured";

/** Failures that say nothing about the credential: they never count toward a block. */
export function isCallersFault(reason: AuthenticationFailureReason): boolean {
  return reason !== "keys_unavailable" && reason !== "checks_busy";
}

/**
 * The outcome of reading a `Proxy-Authorization` value. `message` never holds a password, a
 * token or a hash: it says why, for logs and for the 407 answer. `reason` is finer than what a
 * client should learn (`unknown_user` vs `bad_password`): log it, don't answer with it.
 */
export type Authentication =
  | {
      ok: true;
      caller: Caller;
      /** Wall-clock ms after which the result must be verified again (token `exp`, Basic TTL). */
      expiresAtMs: number;
    }
  | { ok: false; reason: AuthenticationFailureReason; message: string };

/** The callers section of /status; absent while no authenticator is loaded. */
export interface CallersStatus {
  /** The users file in force (absent without `callers.basic`); `stale` while the file on disk is refused. */
  usersFile?: UsersFileStatus;
  /** The process's password check queue (absent without `callers.basic`). */
  passwordChecks?: PasswordCheckStatus;
  /** Addresses refused now for repeated failed credentials (429 `caller_throttled`). */
  blockedAddresses: number;
}

// The config shapes this room takes are declared once, with the rest of the configuration.
export type {
  AllowRule,
  BasicCallersConfig,
  CallersConfig,
  KubernetesCallersConfig,
} from "../config/proxy-config.js";

/** `user:alice` / `sa:payments/billing-client`: how a caller appears in logs and metrics. */
export function callerLabel(caller: Caller): string {
  return caller.kind === "user" ? `user:${caller.name}` : `sa:${caller.namespace}/${caller.name}`;
}
