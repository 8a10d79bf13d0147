/**
 * The key DPoP proofs are signed with (RFC 9449 §4.2): an ephemeral one made at start, which
 * never leaves the process, or `dpop.keyFile`, shared by replicas and re-read when it changes
 * (the credential reader of secret-reader.ts polls it, as it polls private-key-jwt's key).
 *
 * Signing is one node:crypto call over a header encoded once per key: ~20–25 µs of CPU per ES256
 * proof here against ~45–80 µs for jose 6 (which signs through WebCrypto), and synchronous, so
 * the header injector and the 401 replay can sign without awaiting; test/dpop/proof-cost.test.ts
 * measures both. Key checks are private-key-jwt's plus DPoP's own (base/dpop-key-check.ts); the
 * signing options are private-key-jwt's (client-auth/jws.ts).
 */
import { createHash, createPublicKey, generateKeyPair, type KeyObject } from "node:crypto";
import { promisify } from "node:util";
import type { Clock } from "../../base/clock.js";
import { DPOP_KEYS_SUPPORTED, dpopSigningAlgorithm } from "../../base/dpop-key-check.js";
import { describeKey, parsePrivateKeyPem } from "../../base/private-key.js";
import type { AssertionAlgorithm } from "../../config/proxy-config.js";
import { BearerProxyError } from "../../errors.js";
import { base64url, jwsSigner } from "../client-auth/jws.js";
import { createCredentialReader } from "../secret-reader.js";

/** The JWS algorithms a DPoP key signs with; the same four as private-key-jwt. */
export type DpopAlgorithm = AssertionAlgorithm;

/** `upstreams[].dpop`. */
export interface DpopKeySpec {
  /**
   * PEM private key (PKCS#8, PKCS#1 or SEC1: EC P-256, RSA ≥ 2048 bits, Ed25519), shared by
   * replicas; re-read when it changes. Undefined: an ephemeral key made at start, per process.
   */
  keyFile?: string | undefined;
  /** Undefined: inferred from the key file (RSA → RS256), ES256 for an ephemeral key. */
  algorithm?: DpopAlgorithm | undefined;
}

/** The public key as the proof's `jwk` header carries it: the required members only. */
export type DpopPublicJwk =
  | { crv: "P-256"; kty: "EC"; x: string; y: string }
  | { e: string; kty: "RSA"; n: string }
  | { crv: "Ed25519"; kty: "OKP"; x: string };

/** A signing key for proofs. Algorithm, jkt and JWK change when the key file does. */
export interface DpopKey {
  readonly algorithm: DpopAlgorithm;
  /** RFC 7638 thumbprint (SHA-256, base64url) of the public key: the token's `cnf.jkt`. */
  readonly jkt: string;
  readonly publicJwk: Readonly<DpopPublicJwk>;
  /** True for the per-process key (no keyFile). */
  readonly ephemeral: boolean;
  /** Secret-free facts for logs and `bearer-proxy check`: algorithm, key kind, source, jkt. */
  describe(): string;
  /**
   * `header.payload.signature` of `claims` under `{ typ: "dpop+jwt", alg, jwk }` (RFC 9449
   * §4.2); the header is encoded once per key, only the claims per proof.
   */
  sign(claims: Readonly<Record<string, unknown>>): string;
  /**
   * The same from the claims' JSON text (proof.ts builds it from a template): no object to
   * serialize per proof.
   */
  signJson(claimsJson: string): string;
  /** Called after the key file changed to a usable key with another thumbprint. */
  onChange(listener: (key: DpopKey) => void): () => void;
  /** Stat the key file now and take a changed key (what the poll does; a no-op when ephemeral). */
  check(): Promise<void>;
  close(): void;
}

export interface DpopKeyOptions {
  /** Timers of the key file poll (base/clock.ts); default the system clock. */
  clock?: Clock | undefined;
  /** How often the key file is stat()ed; 0 disables polling (check() still works). Default 5 s. */
  pollIntervalMs?: number | undefined;
  /** A changed key file that cannot be used: the previous key stays in force. */
  onReloadError?: ((error: BearerProxyError) => void) | undefined;
}

/** What one key signs with; replaced whole when the key file changes. */
interface Signer {
  algorithm: DpopAlgorithm;
  jkt: string;
  publicJwk: DpopPublicJwk;
  description: string;
  signJson(claimsJson: string): string;
}

const generateKeyPairAsync = promisify(generateKeyPair);

/** The key `spec` names, or a new ephemeral one. Rejects with BP_ERR_CLIENT_KEY / BP_ERR_SECRET_FILE. */
export async function loadDpopKey(
  spec: DpopKeySpec,
  options: DpopKeyOptions = {},
): Promise<DpopKey> {
  if (spec.keyFile === undefined) {
    const algorithm = spec.algorithm ?? "ES256";
    const signer = createSigner(await generateKey(algorithm), algorithm, undefined);
    return keyFrom(signer, { ephemeral: true });
  }
  const keyFile = spec.keyFile;
  // The private-key-jwt reader: it polls stat() (Kubernetes swaps a ..data symlink, which
  // fs.watch misses) and reports a change once, with the new PEM.
  const reader = createCredentialReader(
    {
      clientId: { kind: "inline", value: "dpop" },
      clientAuth: "private-key-jwt",
      privateKeyJwt: {
        keyFile,
        keyId: undefined,
        certificateFile: undefined,
        audience: undefined,
        lifetimeMs: 0,
        algorithm: spec.algorithm,
      },
    },
    { clock: options.clock, pollIntervalMs: options.pollIntervalMs },
  );
  let pem: string | undefined;
  try {
    pem = (await reader.read()).clientKeyPem;
  } catch (error) {
    reader.close();
    const code = ((error as { cause?: { code?: string } }).cause?.code ?? "error") as string;
    throw new BearerProxyError(
      "BP_ERR_SECRET_FILE",
      `cannot read dpop.keyFile ${keyFile} (${code})`,
      {
        cause: error,
      },
    );
  }
  let signer: Signer;
  try {
    signer = signerFromPem(pem, keyFile, spec.algorithm);
  } catch (error) {
    reader.close();
    throw error;
  }
  const key = keyFrom(signer, {
    ephemeral: false,
    check: () => reader.check(),
    close: () => reader.close(),
  });
  reader.onChange((credentials) => {
    try {
      key.replace(signerFromPem(credentials.clientKeyPem, keyFile, spec.algorithm));
    } catch (error) {
      options.onReloadError?.(error as BearerProxyError);
    }
  });
  return key;
}

/** RFC 7638: SHA-256 over the required members in lexicographic order, no whitespace. */
export function jwkThumbprint(jwk: Readonly<DpopPublicJwk>): string {
  let canonical: string;
  switch (jwk.kty) {
    case "EC":
      canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x, y: jwk.y });
      break;
    case "RSA":
      canonical = JSON.stringify({ e: jwk.e, kty: jwk.kty, n: jwk.n });
      break;
    case "OKP":
      canonical = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x });
      break;
  }
  return base64url(createHash("sha256").update(canonical).digest());
}

function keyFrom(
  first: Signer,
  source: { ephemeral: boolean; check?: () => Promise<void>; close?: () => void },
): DpopKey & { replace(next: Signer): void } {
  let current = first;
  const listeners = new Set<(key: DpopKey) => void>();
  const key = {
    get algorithm() {
      return current.algorithm;
    },
    get jkt() {
      return current.jkt;
    },
    get publicJwk() {
      return current.publicJwk;
    },
    ephemeral: source.ephemeral,
    describe: () => current.description,
    sign: (claims: Readonly<Record<string, unknown>>) => current.signJson(JSON.stringify(claims)),
    signJson: (claimsJson: string) => current.signJson(claimsJson),
    onChange(listener: (key: DpopKey) => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    check: () => source.check?.() ?? Promise.resolve(),
    close() {
      listeners.clear();
      source.close?.();
    },
    replace(next: Signer) {
      const changed = next.jkt !== current.jkt;
      current = next;
      if (!changed) return; // the same key re-encoded: tokens bound to it stay good
      for (const listener of listeners) {
        try {
          listener(key);
        } catch {}
      }
    },
  };
  return key;
}

async function generateKey(algorithm: DpopAlgorithm): Promise<KeyObject> {
  switch (algorithm) {
    case "ES256":
      return (await generateKeyPairAsync("ec", { namedCurve: "P-256" })).privateKey;
    case "EdDSA":
      return (await generateKeyPairAsync("ed25519")).privateKey;
    case "RS256":
    case "PS256":
      return (await generateKeyPairAsync("rsa", { modulusLength: 2048 })).privateKey;
  }
}

function signerFromPem(
  pem: string | undefined,
  keyFile: string,
  configured: DpopAlgorithm | undefined,
): Signer {
  const key = parsePrivateKeyPem(pem, `dpop.keyFile ${keyFile}`);
  const usable = dpopSigningAlgorithm(key, configured);
  if (usable.problem !== undefined) {
    throw new BearerProxyError(
      "BP_ERR_CLIENT_KEY",
      `dpop.keyFile ${keyFile}: ${usable.problem} (${DPOP_KEYS_SUPPORTED})`,
    );
  }
  return createSigner(key, usable.algorithm, keyFile);
}

/** `keyFile` undefined: the ephemeral key. */
function createSigner(
  key: KeyObject,
  algorithm: DpopAlgorithm,
  keyFile: string | undefined,
): Signer {
  const publicJwk = publicJwkOf(key);
  const jkt = jwkThumbprint(publicJwk);
  return {
    algorithm,
    jkt,
    publicJwk,
    description:
      keyFile === undefined
        ? `dpop: ${algorithm} with an ephemeral ${describeKey(key)} key, jkt ${jkt}`
        : `dpop: ${algorithm} with the ${describeKey(key)} key in ${keyFile}, jkt ${jkt}`,
    signJson: proofSigner(key, algorithm, publicJwk),
  };
}

/**
 * `claimsJson` → compact JWS, with as few copies as a proof allows: the header part is encoded
 * once per key and stays in the signing-input buffer, which is reused (as is the buffer the
 * claims are encoded from); per proof the claims are base64url-encoded once, written behind
 * the header, signed in place, and the signature encoded straight from the signer's bytes.
 * Synchronous, so one buffer per key is enough.
 */
function proofSigner(
  key: KeyObject,
  algorithm: DpopAlgorithm,
  publicJwk: DpopPublicJwk,
): (claimsJson: string) => string {
  const header = `${base64url(JSON.stringify({ typ: "dpop+jwt", alg: algorithm, jwk: publicJwk }))}.`;
  const signature = jwsSigner(key, algorithm);
  let claimsBytes = Buffer.allocUnsafeSlow(512);
  let input = Buffer.allocUnsafeSlow(header.length + 1024);
  input.write(header, 0, "latin1");
  return (claimsJson) => {
    // Claims are ASCII (proof.ts), but a UTF-8 byte count keeps any string right.
    const claimsLength = Buffer.byteLength(claimsJson);
    if (claimsLength > claimsBytes.length) claimsBytes = Buffer.allocUnsafeSlow(2 * claimsLength);
    claimsBytes.write(claimsJson, 0);
    const payload = claimsBytes.toString("base64url", 0, claimsLength);
    const inputLength = header.length + payload.length;
    if (inputLength > input.length) {
      input = Buffer.allocUnsafeSlow(2 * inputLength);
      input.write(header, 0, "latin1");
    }
    input.write(payload, header.length, "latin1");
    const signed = signature(input.subarray(0, inputLength));
    return `${header}${payload}.${signed.toString("base64url")}`;
  };
}

function publicJwkOf(key: KeyObject): DpopPublicJwk {
  const jwk = createPublicKey(key).export({ format: "jwk" });
  switch (jwk.kty) {
    case "EC":
      return { crv: "P-256", kty: "EC", x: jwk.x!, y: jwk.y! };
    case "RSA":
      return { e: jwk.e!, kty: "RSA", n: jwk.n! };
    default:
      return { crv: "Ed25519", kty: "OKP", x: jwk.x! };
  }
}
