import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import bcrypt from "bcryptjs";
import {
  type CryptoKey,
  exportJWK,
  generateKeyPair,
  type JWK,
  type JWTPayload,
  SignJWT,
} from "jose";
import { type CapturingLogger, createCapturingLogger } from "../helpers/app-under-test.js";

/** bcrypt at cost 4: the real algorithm, ~1 ms a hash. */
export function hashPassword(password: string): string {
  return bcrypt.hashSync(password, 4);
}

/** The same hash as `htpasswd -B` writes it (`$2y$`). */
export function asHtpasswdB(hash: string): string {
  return `$2y$${hash.slice(4)}`;
}

export async function tempDir(): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "bp-callers-"));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}

/** A logger whose lines are kept raw (to search for leaked secrets) and parsed. */
export function capturingLogger(): CapturingLogger {
  return createCapturingLogger("info");
}

export const ISSUER = "https://kubernetes.default.svc.cluster.local";
export const AUDIENCE = "bearer-proxy";

/** A cluster signing key: the private half signs, `jwk` (with kid and alg) is published. */
export interface SigningKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
}

export async function signingKey(kid: string, alg = "RS256"): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: "sig" };
  return { kid, alg, privateKey, publicKey, jwk };
}

/** One RS256 {@link SigningKey} per kid, in that order. */
export function signingKeys<const Kids extends readonly string[]>(
  ...kids: Kids
): Promise<{ [I in keyof Kids]: SigningKey }> {
  return Promise.all(kids.map((kid) => signingKey(kid))) as Promise<{
    [I in keyof Kids]: SigningKey;
  }>;
}

export function jwks(...keys: SigningKey[]): string {
  return JSON.stringify({ keys: keys.map((k) => k.jwk) });
}

/**
 * A token shaped like a projected service-account token for `ns/name`, valid for an hour;
 * `claims` overrides or adds claims, `undefined` values remove one.
 */
export async function serviceAccountToken(
  key: SigningKey,
  options: {
    namespace?: string;
    name?: string;
    claims?: Record<string, unknown>;
    nowSeconds?: number;
  } = {},
): Promise<string> {
  const namespace = options.namespace ?? "payments";
  const name = options.name ?? "billing-client";
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  const payload: JWTPayload = {
    iss: ISSUER,
    aud: [AUDIENCE],
    sub: `system:serviceaccount:${namespace}:${name}`,
    iat: now,
    nbf: now,
    exp: now + 3600,
    "kubernetes.io": {
      namespace,
      serviceaccount: { name, uid: "6b1d6b8e-6f3c-4d3a-9a5e-0f0e8c7d6a51" },
      pod: { name: "billing-7d9c", uid: "0a7e6c8b-1c2d-4e5f-8a9b-0c1d2e3f4a5b" },
    },
  };
  for (const [claim, value] of Object.entries(options.claims ?? {})) {
    if (value === undefined) delete payload[claim];
    else payload[claim] = value;
  }
  return new SignJWT(payload)
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: "JWT" })
    .sign(key.privateKey);
}
