import { createHmac, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";

/**
 * Access tokens the emulator issues: compact JWS (RFC 7515) with HS256 over a random key made at
 * start. The version claim `ver` binds a token to the API version it was issued for.
 *
 * Revocation rotates the signing key and keeps the old key only to tell "revoked" apart from
 * "not ours", so memory stays bounded however many tokens are issued.
 */

/** The claims inside an emulator access token. */
export interface AccessTokenClaims {
  /** Issued at, seconds since the epoch. */
  iat: number;
  /** Expiry, seconds since the epoch: `iat + lifetime`. */
  exp: number;
  jti: string;
  client_id: string;
  /** API version the token was issued for, e.g. `2022-01-01`. */
  ver: string;
  scope: string;
}

/** Why a token was refused, phrased for an error body (never contains the token). */
export type TokenRejection =
  | "malformed token"
  | "token not issued by this emulator"
  | "token revoked"
  | "token expired"
  | "token issued for another API version";

export type TokenCheck =
  | { ok: true; claims: AccessTokenClaims }
  | { ok: false; reason: TokenRejection; detail?: string };

export interface AccessTokenAuthority {
  issue(clientId: string, version: string, scope: string, lifetimeSeconds: number): string;
  verify(token: string, expectedVersion: string): TokenCheck;
  revokeAll(): void;
}

// A fixed header, compared byte for byte: no alg negotiation, so no "alg: none" confusion.
const HEADER = base64url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
const SEGMENT = /^[A-Za-z0-9_-]+$/;

function base64url(text: string): string {
  return Buffer.from(text, "utf8").toString("base64url");
}

function sign(key: Buffer, signingInput: string): Buffer {
  return createHmac("sha256", key).update(signingInput).digest();
}

function signatureMatches(key: Buffer, signingInput: string, signature: Buffer): boolean {
  const expected = sign(key, signingInput);
  return expected.length === signature.length && timingSafeEqual(expected, signature);
}

function parseClaims(payload: string): AccessTokenClaims | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(payload, "base64url").toString("utf8"));
    if (typeof value !== "object" || value === null) return undefined;
    const c = value as Record<string, unknown>;
    const valid =
      Number.isInteger(c.iat) &&
      Number.isInteger(c.exp) &&
      typeof c.jti === "string" &&
      typeof c.client_id === "string" &&
      typeof c.ver === "string" &&
      typeof c.scope === "string";
    return valid ? (c as unknown as AccessTokenClaims) : undefined;
  } catch {
    return undefined;
  }
}

/** Create the token authority; `now` is the wall clock in milliseconds. */
export function createAccessTokenAuthority(now: () => number): AccessTokenAuthority {
  let key = randomBytes(32);
  const revokedKeys: Buffer[] = [];

  return {
    issue(clientId, version, scope, lifetimeSeconds) {
      const iat = Math.floor(now() / 1000);
      const claims: AccessTokenClaims = {
        iat,
        exp: iat + lifetimeSeconds,
        jti: randomUUID(),
        client_id: clientId,
        ver: version,
        scope,
      };
      const signingInput = `${HEADER}.${base64url(JSON.stringify(claims))}`;
      return `${signingInput}.${sign(key, signingInput).toString("base64url")}`;
    },

    verify(token, expectedVersion) {
      const parts = token.split(".");
      const [header, payload, signature] = parts;
      if (
        parts.length !== 3 ||
        header !== HEADER ||
        payload === undefined ||
        signature === undefined ||
        !SEGMENT.test(payload) ||
        !SEGMENT.test(signature)
      ) {
        return { ok: false, reason: "malformed token" };
      }
      const signingInput = `${header}.${payload}`;
      const mac = Buffer.from(signature, "base64url");
      if (!signatureMatches(key, signingInput, mac)) {
        const revoked = revokedKeys.some((old) => signatureMatches(old, signingInput, mac));
        return {
          ok: false,
          reason: revoked ? "token revoked" : "token not issued by this emulator",
        };
      }
      const claims = parseClaims(payload);
      if (!claims) return { ok: false, reason: "malformed token" };
      // RFC 7519 §4.1.4: not accepted on or after exp.
      if (now() >= claims.exp * 1000) return { ok: false, reason: "token expired" };
      if (claims.ver !== expectedVersion) {
        return {
          ok: false,
          reason: "token issued for another API version",
          detail: `token is for ${claims.ver}, request is for ${expectedVersion}`,
        };
      }
      return { ok: true, claims };
    },

    revokeAll() {
      revokedKeys.push(key);
      key = randomBytes(32);
    },
  };
}
