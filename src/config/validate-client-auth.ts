/**
 * Rules of `clientAuth` the schema cannot express (issue 16): the secretless methods never get a
 * secret, each method has what it needs, and one method's settings are not left lying around
 * under another (a forgotten `clientAuth: private-key-jwt` must not silently send a secret).
 */
import { createPrivateKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { inferAlgorithm, keyProblem } from "../base/private-key.js";
import { type IssueList, type IssuePath, isObject } from "./issues.js";
import type { AssertionAlgorithm } from "./proxy-config.js";

const SECRET_METHODS = new Set(["body", "basic"]);
const METHODS = new Set([
  ...SECRET_METHODS,
  "private-key-jwt",
  "client-assertion-file",
  "tls-client-auth",
]);

/** Settings that belong to one method only, with that method. */
const METHOD_SETTINGS: readonly [string, string][] = [
  ["clientKeyFile", "private-key-jwt"],
  ["clientKeyId", "private-key-jwt"],
  ["clientCertificateFile", "private-key-jwt"],
  ["assertion", "private-key-jwt"],
  ["clientAssertionFile", "client-assertion-file"],
];

/** What each secretless method authenticates with, for messages. */
const AUTHENTICATES_WITH: Readonly<Record<string, string>> = {
  "private-key-jwt": "a JWT signed with clientKeyFile",
  "client-assertion-file": "the JWT in clientAssertionFile",
  "tls-client-auth": "its TLS client certificate",
};

/** The method of an upstream as written (default `body`), or undefined when mistyped. */
export function clientAuthOf(u: Record<string, unknown>): string | undefined {
  const method = u.clientAuth ?? "body";
  return typeof method === "string" ? method : undefined;
}

/** True when the upstream's method sends a client secret (so one is required). */
export function needsSecret(u: Record<string, unknown>): boolean {
  const method = clientAuthOf(u);
  return method === undefined || SECRET_METHODS.has(method);
}

/** Check one upstream's client-authentication settings; file paths are checked by the caller. */
export function checkClientAuth(
  u: Record<string, unknown>,
  at: IssuePath,
  issues: IssueList,
  resolve: (key: string, value: string) => string,
): void {
  const method = clientAuthOf(u);
  if (method === undefined || !METHODS.has(method)) return; // the schema reports it
  if (!SECRET_METHODS.has(method)) {
    for (const key of ["clientSecret", "clientSecretFile"]) {
      if (u[key] !== undefined) {
        issues.add(
          [...at, key],
          `expected no client secret with clientAuth: ${method} (it authenticates with ${AUTHENTICATES_WITH[method] ?? "no secret"} and never sends one), found ${key}`,
        );
      }
    }
  }
  for (const [key, owner] of METHOD_SETTINGS) {
    if (u[key] !== undefined && method !== owner) {
      issues.add(
        [...at, key],
        `only used with clientAuth: ${owner}, found clientAuth: ${method}${u.clientAuth === undefined ? " (the default)" : ""}`,
      );
    }
  }
  if (u.basicEncoding !== undefined && method !== "basic") {
    issues.warn(
      [...at, "basicEncoding"],
      `ignored: only used with clientAuth: basic, found ${method}`,
    );
  }
  switch (method) {
    case "private-key-jwt":
      if (u.clientKeyFile === undefined) {
        issues.add(
          [...at, "clientKeyFile"],
          "required with clientAuth: private-key-jwt (the PEM private key that signs the assertion), found none",
        );
      } else if (typeof u.clientKeyFile === "string") {
        checkSigningKey(u, at, resolve(`clientKeyFile`, u.clientKeyFile), issues);
      }
      break;
    case "client-assertion-file":
      if (u.clientAssertionFile === undefined) {
        issues.add(
          [...at, "clientAssertionFile"],
          "required with clientAuth: client-assertion-file (the file holding the pre-signed JWT), found none",
        );
      }
      break;
    case "tls-client-auth": {
      const tls = isObject(u.tokenTls) ? u.tokenTls : isObject(u.tls) ? u.tls : undefined;
      const where = isObject(u.tokenTls) ? "tokenTls" : "tls";
      if (!tls || tls.certFile === undefined || tls.keyFile === undefined) {
        issues.add(
          [...at, "tokenTls"],
          `required with clientAuth: tls-client-auth: a client certificate (tokenTls.certFile and tokenTls.keyFile, or tls.certFile and tls.keyFile without tokenTls), found ${tls ? `${where} without certFile/keyFile` : "neither"}`,
        );
      }
      break;
    }
  }
}

/** The key must be able to sign with the configured (or inferred) algorithm. */
function checkSigningKey(
  u: Record<string, unknown>,
  at: IssuePath,
  file: string,
  issues: IssueList,
): void {
  let key: ReturnType<typeof createPrivateKey>;
  try {
    key = createPrivateKey({ key: readFileSync(file, "latin1"), format: "pem" });
  } catch {
    return; // unreadable or not a key: the file check reports it with the field's path
  }
  const configured = isObject(u.assertion) ? u.assertion.algorithm : undefined;
  const inferred = inferAlgorithm(key);
  if (typeof configured === "string") {
    const problem = keyProblem(key, configured as AssertionAlgorithm);
    if (problem !== undefined) {
      issues.add(
        [...at, "assertion", "algorithm"],
        `expected a key that fits: ${problem} in ${file}`,
      );
    }
    return;
  }
  const problem =
    typeof inferred === "string"
      ? keyProblem(key, inferred)
      : `cannot sign with ${inferred.problem}`;
  if (problem !== undefined) {
    issues.add(
      [...at, "clientKeyFile"],
      `expected an RSA (≥ 2048 bits), EC P-256 or Ed25519 private key, found: ${problem} in ${file}`,
    );
  }
}
