/**
 * Whether a private key can sign DPoP proofs (RFC 9449 §4.2), and with which algorithm:
 * private-key-jwt's checks (private-key.ts) plus what a proof needs beyond an assertion.
 * The key loader (token/dpop/dpop-key.ts) and the start-up check (config/validate-semantics.ts)
 * both ask here, so a key refused at start is refused for the same reason when it is re-read.
 */
import type { KeyObject } from "node:crypto";
import { type JwsAlgorithm, signingAlgorithm } from "./private-key.js";

/** What a DPoP key may be, for messages. */
export const DPOP_KEYS_SUPPORTED =
  "supported: ES256 with EC P-256, RS256 and PS256 with RSA ≥ 2048 bits, EdDSA with Ed25519";

/**
 * The algorithm `key` signs proofs with (`configured`, else inferred: RSA → RS256, P-256 →
 * ES256, Ed25519 → EdDSA), or what is wrong with it (never key material).
 */
export function dpopSigningAlgorithm(
  key: KeyObject,
  configured: JwsAlgorithm | undefined,
): { algorithm: JwsAlgorithm; problem?: undefined } | { problem: string } {
  const chosen = signingAlgorithm(key, configured, "a proof");
  if (chosen.problem !== undefined) return chosen;
  // Ed448 passes keyProblem (assertions allow it), but resource servers verify Ed25519 only;
  // an RSA-PSS-restricted key has no JWK form for the proof's `jwk` header.
  if (key.asymmetricKeyType === "ed448") {
    return { problem: "EdDSA needs an Ed25519 key for DPoP, found Ed448" };
  }
  if (key.asymmetricKeyType === "rsa-pss") {
    return {
      problem:
        "an RSA-PSS-restricted key cannot be published as a JWK (a plain RSA key signs PS256 too)",
    };
  }
  return chosen;
}
