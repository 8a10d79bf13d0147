/**
 * Private keys as the house signs with them (private-key-jwt assertions, DPoP proofs): the PEM
 * read, the JWS algorithm a key signs with, and what is wrong with a key, in words that never
 * hold key material. Config validation asks here at start and the signers when a key file is
 * re-read, so a key refused at start is refused for the same reason later.
 */
import { createPrivateKey, type KeyObject } from "node:crypto";
import { BearerProxyError } from "../errors.js";

/** The JWS algorithms (RFC 7518) assertions and proofs are signed with. */
export type JwsAlgorithm = "RS256" | "PS256" | "ES256" | "EdDSA";

/**
 * The algorithm a key signs with when none is configured, or why it cannot: RSA → RS256,
 * RSA-PSS → PS256, P-256 → ES256, Ed25519/Ed448 → EdDSA.
 */
export function inferAlgorithm(key: KeyObject): JwsAlgorithm | { problem: string } {
  switch (key.asymmetricKeyType) {
    case "rsa":
      return "RS256";
    case "rsa-pss":
      return "PS256";
    case "ed25519":
    case "ed448":
      return "EdDSA";
    case "ec":
      return key.asymmetricKeyDetails?.namedCurve === "prime256v1"
        ? "ES256"
        : { problem: `an EC key on ${key.asymmetricKeyDetails?.namedCurve} (ES256 needs P-256)` };
    default:
      return { problem: `a ${key.asymmetricKeyType ?? "symmetric"} key` };
  }
}

/** Undefined when `key` can sign with `algorithm`, else what is wrong (no key material in it). */
export function keyProblem(key: KeyObject, algorithm: JwsAlgorithm): string | undefined {
  const type = key.asymmetricKeyType;
  if (key.type !== "private") return "expected a private key";
  switch (algorithm) {
    case "RS256":
    case "PS256": {
      if (type !== "rsa" && !(type === "rsa-pss" && algorithm === "PS256")) {
        return `${algorithm} needs an RSA key, found ${describeKey(key)}`;
      }
      const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
      // RFC 7518 §3.3: 2048 bits or larger.
      return bits < 2048
        ? `${algorithm} needs an RSA key of 2048 bits or more, found ${bits}`
        : undefined;
    }
    case "ES256":
      return type === "ec" && key.asymmetricKeyDetails?.namedCurve === "prime256v1"
        ? undefined
        : `ES256 needs an EC P-256 key, found ${describeKey(key)}`;
    case "EdDSA":
      return type === "ed25519" || type === "ed448"
        ? undefined
        : `EdDSA needs an Ed25519 or Ed448 key, found ${describeKey(key)}`;
  }
}

/** "RSA 2048-bit", "EC P-256", "Ed25519": what kind of key, never the key. */
export function describeKey(key: KeyObject): string {
  const d = key.asymmetricKeyDetails;
  switch (key.asymmetricKeyType) {
    case "rsa":
    case "rsa-pss":
      return `${key.asymmetricKeyType === "rsa" ? "RSA" : "RSA-PSS"} ${d?.modulusLength ?? "?"}-bit`;
    case "ec":
      return `EC ${d?.namedCurve === "prime256v1" ? "P-256" : d?.namedCurve}`;
    case "ed25519":
      return "Ed25519";
    case "ed448":
      return "Ed448";
    default:
      return key.asymmetricKeyType ?? key.type;
  }
}

/**
 * `pem` as a private key; BP_ERR_CLIENT_KEY naming `field` (e.g. "clientKeyFile keys/a.pem")
 * otherwise. Node's message names the PEM problem, never the key's bytes.
 */
export function parsePrivateKeyPem(pem: string | undefined, field: string): KeyObject {
  if (pem === undefined) {
    throw new BearerProxyError("BP_ERR_CLIENT_KEY", `no private key read from ${field}`);
  }
  try {
    return createPrivateKey({ key: pem, format: "pem" });
  } catch (error) {
    throw new BearerProxyError(
      "BP_ERR_CLIENT_KEY",
      `${field} does not hold an unencrypted PEM private key (${(error as Error).message})`,
      { cause: error },
    );
  }
}

/**
 * The algorithm `key` signs `what` ("an assertion", "a proof") with: `configured`, else the
 * key's own (inferAlgorithm); or what is wrong with the pair, never key material.
 */
export function signingAlgorithm(
  key: KeyObject,
  configured: JwsAlgorithm | undefined,
  what: string,
): { algorithm: JwsAlgorithm; problem?: undefined } | { problem: string } {
  const inferred = inferAlgorithm(key);
  const algorithm = configured ?? (typeof inferred === "string" ? inferred : undefined);
  if (algorithm === undefined) {
    return {
      problem: `cannot sign ${what} with ${typeof inferred === "string" ? "" : inferred.problem}`,
    };
  }
  const problem = keyProblem(key, algorithm);
  return problem === undefined ? { algorithm } : { problem };
}
