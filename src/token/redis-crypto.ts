/**
 * Encryption of tokens stored in Redis: AES-256-GCM under a key derived from the client secret,
 * so whoever can read Redis but lacks the secret can neither use nor forge a token.
 *
 * Stored value (base64): version byte (1) | IV (12) | GCM tag (16) | ciphertext of the JSON token.
 * The credential key is authenticated as associated data, so a value copied under another
 * credential's key does not decrypt either.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { isBearerTokenSyntax } from "../base/bearer-token.js";
import type { SharedToken } from "./shared-token-cache.js";

const FORMAT_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEADER_BYTES = 1 + IV_BYTES + TAG_BYTES;
const HKDF_INFO = "bearer-proxy redis token cache v1";

/**
 * The 32-byte AES key for one credential: HKDF-SHA256 with the client secret as input keying
 * material and the credential key as salt (RFC 5869). Different credentials sharing a secret
 * still get different keys.
 */
export function deriveTokenKey(secret: string, credentialKey: string): Buffer {
  return Buffer.from(hkdfSync("sha256", secret, credentialKey, HKDF_INFO, 32));
}

function associatedData(credentialKey: string): Buffer {
  return Buffer.concat([Buffer.of(FORMAT_VERSION), Buffer.from(credentialKey, "utf8")]);
}

/** Encrypts a token for storage under `credentialKey`. A fresh random IV every call. */
export function encryptToken(token: SharedToken, key: Buffer, credentialKey: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(associatedData(credentialKey));
  const plaintext = Buffer.from(JSON.stringify(token), "utf8");
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.of(FORMAT_VERSION), iv, cipher.getAuthTag(), ciphertext]).toString(
    "base64",
  );
}

/**
 * The token in a stored value, or undefined when it can't be trusted: unknown version, wrong
 * key (the secret was rotated), tampering, or a payload that isn't a token. Callers treat
 * undefined as a cache miss.
 */
export function decryptToken(
  stored: string,
  key: Buffer,
  credentialKey: string,
): SharedToken | undefined {
  const raw = Buffer.from(stored, "base64");
  if (raw.length <= HEADER_BYTES || raw[0] !== FORMAT_VERSION) return undefined;
  const iv = raw.subarray(1, 1 + IV_BYTES);
  const tag = raw.subarray(1 + IV_BYTES, HEADER_BYTES);
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(associatedData(credentialKey));
    decipher.setAuthTag(tag);
    const plaintext = Buffer.concat([
      decipher.update(raw.subarray(HEADER_BYTES)),
      decipher.final(),
    ]);
    return parseSharedToken(JSON.parse(plaintext.toString("utf8")));
  } catch {
    return undefined;
  }
}

function parseSharedToken(value: unknown): SharedToken | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as Record<string, unknown>;
  // Authenticated, but checked like a token response all the same before it can reach a header.
  if (typeof v.accessToken !== "string" || !isBearerTokenSyntax(v.accessToken)) return undefined;
  if (typeof v.tokenType !== "string") return undefined;
  if (v.scope !== undefined && typeof v.scope !== "string") return undefined;
  if (!Number.isFinite(v.obtainedAtWallMs) || !Number.isFinite(v.expiresAtWallMs)) return undefined;
  return {
    accessToken: v.accessToken,
    tokenType: v.tokenType,
    scope: v.scope as string | undefined,
    obtainedAtWallMs: v.obtainedAtWallMs as number,
    expiresAtWallMs: v.expiresAtWallMs as number,
  };
}
