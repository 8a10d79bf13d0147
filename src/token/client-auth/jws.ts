/**
 * Compact JWS signing with node:crypto (RFC 7515 §7.1) for the four algorithms assertions use.
 * Small enough that the sidecar needs no JOSE library: a signature is one crypto.sign call.
 */
import {
  constants,
  createHash,
  type KeyObject,
  type SignKeyObjectInput,
  sign,
  type X509Certificate,
} from "node:crypto";
import type { JwsAlgorithm } from "../../base/private-key.js";

/** base64url without padding (RFC 7515 §2). */
export function base64url(data: Buffer | string): string {
  return Buffer.from(data).toString("base64url");
}

/** `x5t#S256`: base64url SHA-256 of the certificate's DER (RFC 7515 §4.1.8). */
export function certificateThumbprint(certificate: X509Certificate): string {
  return base64url(createHash("sha256").update(certificate.raw).digest());
}

/** `header.payload.signature` signed with `key` (checked with base/private-key.ts keyProblem first). */
export function signJws(
  header: Record<string, unknown>,
  payload: Record<string, unknown>,
  key: KeyObject,
  algorithm: JwsAlgorithm,
): string {
  const input = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(payload))}`;
  return `${input}.${base64url(jwsSigner(key, algorithm)(Buffer.from(input, "ascii")))}`;
}

/**
 * The JWS signature function of `key` for `algorithm`: signing input → signature bytes
 * (RFC 7518 §3). Made once per key; the DPoP signer calls it for every proof.
 *
 * ES256 signs DER and rewrites it as r || s here: Node 24's `dsaEncoding: "ieee-p1363"`
 * costs a second signature's worth (~16 µs on the bench machine, bench/feature-floor.mjs),
 * DER plus this conversion costs what Node 20 pays. Only OpenSSL's own output is read; any
 * shape but the one expected falls back to Node's conversion.
 */
export function jwsSigner(key: KeyObject, algorithm: JwsAlgorithm): (input: Buffer) => Buffer {
  const digest = algorithm === "EdDSA" ? null : "sha256"; // EdDSA hashes internally
  const options = signOptions(key, algorithm);
  if (algorithm !== "ES256") return (input) => sign(digest, input, options);
  return (input) =>
    ecdsaDerToJose(sign(digest, input, key), P256_FIELD_BYTES) ?? sign(digest, input, options);
}

/** r and s of a P-256 signature are 32 bytes each in a JWS. */
const P256_FIELD_BYTES = 32;

/**
 * ECDSA-Sig-Value (SEQUENCE { r INTEGER, s INTEGER }, DER, short-form lengths as P-256's
 * always are) → r || s, each left-padded to `size` bytes; undefined for anything else.
 */
export function ecdsaDerToJose(der: Buffer, size: number): Buffer | undefined {
  if (der.length < 8 || der[0] !== 0x30 || der[1] !== der.length - 2) return undefined;
  const out = Buffer.alloc(size * 2);
  let at = 2;
  for (let part = 0; part < 2; part++) {
    if (der[at] !== 0x02) return undefined;
    let length = der[at + 1]!;
    let from = at + 2;
    if (length === 0 || length > size + 1 || from + length > der.length) return undefined;
    // A leading zero only keeps a positive integer's high bit clear.
    if (der[from] === 0 && length > 1) {
      from++;
      length--;
    }
    if (length > size) return undefined;
    der.copy(out, part * size + (size - length), from, from + length);
    at = from + length;
  }
  return at === der.length ? out : undefined;
}

/** The node:crypto key options that make `crypto.sign` produce a JWS signature of `algorithm`. */
function signOptions(key: KeyObject, algorithm: JwsAlgorithm): KeyObject | SignKeyObjectInput {
  switch (algorithm) {
    case "RS256":
      return { key, padding: constants.RSA_PKCS1_PADDING };
    case "PS256":
      // RFC 7518 §3.5: MGF1 with SHA-256 and a salt as long as the hash.
      return {
        key,
        padding: constants.RSA_PKCS1_PSS_PADDING,
        saltLength: constants.RSA_PSS_SALTLEN_DIGEST,
      };
    case "ES256":
      // RFC 7518 §3.4: r || s, 32 bytes each, not DER.
      return { key, dsaEncoding: "ieee-p1363" };
    case "EdDSA":
      return key;
  }
}

/** The payload of a compact JWT, unverified, or undefined when `text` is not one. */
export function decodeJwtPayload(text: string): Record<string, unknown> | undefined {
  const parts = text.split(".");
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]+$/.test(p))) return undefined;
  try {
    const payload: unknown = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8"));
    return typeof payload === "object" && payload !== null && !Array.isArray(payload)
      ? (payload as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
