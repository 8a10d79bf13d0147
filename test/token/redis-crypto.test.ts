import { describe, expect, it } from "vitest";
import { decryptToken, deriveTokenKey, encryptToken } from "../../src/token/redis-crypto.js";
import type { SharedToken } from "../../src/token/shared-token-cache.js";

const TOKEN: SharedToken = {
  accessToken: "eyJhbGciOi.secret-token-value",
  tokenType: "Bearer",
  scope: "scripts.read",
  obtainedAtWallMs: 1_700_000_000_000,
  expiresAtWallMs: 1_700_000_600_000,
};
const SECRET = "client-secret-s3cr3t";
const CREDENTIAL = "a".repeat(64);

describe("redis token encryption", () => {
  it("round-trips a token with the same secret and credential", () => {
    const key = deriveTokenKey(SECRET, CREDENTIAL);
    expect(decryptToken(encryptToken(TOKEN, key, CREDENTIAL), key, CREDENTIAL)).toEqual(TOKEN);
    const noScope = { ...TOKEN, scope: undefined };
    expect(decryptToken(encryptToken(noScope, key, CREDENTIAL), key, CREDENTIAL)).toEqual(noScope);
  });

  it("lays out version | 12-byte IV | 16-byte tag | ciphertext, with a fresh IV each time", () => {
    const key = deriveTokenKey(SECRET, CREDENTIAL);
    const a = Buffer.from(encryptToken(TOKEN, key, CREDENTIAL), "base64");
    const b = Buffer.from(encryptToken(TOKEN, key, CREDENTIAL), "base64");
    expect(a[0]).toBe(1);
    expect(a.length).toBe(1 + 12 + 16 + Buffer.byteLength(JSON.stringify(TOKEN)));
    expect(a.subarray(1, 13).equals(b.subarray(1, 13))).toBe(false);
    expect(a.toString("latin1")).not.toContain(TOKEN.accessToken);
    expect(a.toString("latin1")).not.toContain(SECRET);
  });

  it("derives different keys per secret and per credential", () => {
    const key = deriveTokenKey(SECRET, CREDENTIAL);
    expect(key).toHaveLength(32);
    expect(deriveTokenKey("rotated-secret", CREDENTIAL).equals(key)).toBe(false);
    expect(deriveTokenKey(SECRET, "b".repeat(64)).equals(key)).toBe(false);
  });

  it("treats a wrong secret, another credential, tampering or garbage as a miss", () => {
    const key = deriveTokenKey(SECRET, CREDENTIAL);
    const stored = encryptToken(TOKEN, key, CREDENTIAL);
    expect(
      decryptToken(stored, deriveTokenKey("rotated-secret", CREDENTIAL), CREDENTIAL),
    ).toBeUndefined();
    // Same key material under another credential id: the associated data no longer matches.
    expect(decryptToken(stored, key, "b".repeat(64))).toBeUndefined();
    const raw = Buffer.from(stored, "base64");
    for (const index of [0, 5, 20, raw.length - 1]) {
      const tampered = Buffer.from(raw);
      tampered[index] = (tampered[index] ?? 0) ^ 0x01;
      expect(decryptToken(tampered.toString("base64"), key, CREDENTIAL)).toBeUndefined();
    }
    expect(decryptToken("", key, CREDENTIAL)).toBeUndefined();
    expect(decryptToken("not base64 at all!", key, CREDENTIAL)).toBeUndefined();
  });

  it("rejects a well-encrypted payload that is not a token", () => {
    const key = deriveTokenKey(SECRET, CREDENTIAL);
    const notAToken = { ...TOKEN, accessToken: 42 } as unknown as SharedToken;
    expect(decryptToken(encryptToken(notAToken, key, CREDENTIAL), key, CREDENTIAL)).toBeUndefined();
  });

  it("treats a stored token that could break an Authorization header as a miss", () => {
    const key = deriveTokenKey(SECRET, CREDENTIAL);
    for (const accessToken of ["abc\r\nx-injected: 1", "has space", "tab\there"]) {
      const stored = encryptToken({ ...TOKEN, accessToken }, key, CREDENTIAL);
      expect(decryptToken(stored, key, CREDENTIAL)).toBeUndefined();
    }
  });
});
