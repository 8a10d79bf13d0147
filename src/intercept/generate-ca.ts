/**
 * A CA for local use (`bearer-proxy intercept-ca --generate DIR`): an EC P-256 key and a
 * self-signed CA certificate that may sign leaves only (pathLen 0), written as two files, the
 * key with mode 0600 (the loader refuses anything more open). An operator with a company PKI
 * uses an intermediate CA from it instead.
 */
import { randomBytes, webcrypto } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { mkdir, writeFile } from "../base/async-fs.js";

/** File names written by `writeInterceptCa`. */
export const GENERATED_CA_FILES = {
  cert: "intercept-ca.pem",
  key: "intercept-ca-key.pem",
} as const;

const DAY_MS = 24 * 60 * 60 * 1000;

/** Two years: long enough not to re-trust it every quarter; /status and a metric show the end. */
export const GENERATED_CA_VALIDITY_DAYS = 730;

export interface GeneratedCa {
  certPem: string;
  /** PKCS#8 PEM, unencrypted. */
  keyPem: string;
}

/** Make a CA: EC P-256, CA:TRUE pathLen 0, keyCertSign + cRLSign, valid from an hour ago. */
export async function generateInterceptCa(
  options: { nowMs?: number; validityDays?: number; commonName?: string } = {},
): Promise<GeneratedCa> {
  const x509 = await import("@peculiar/x509");
  const crypto = webcrypto as unknown as Parameters<
    (typeof x509)["X509CertificateGenerator"]["createSelfSigned"]
  >[1];
  const nowMs = options.nowMs ?? Date.now();
  const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    "sign",
    "verify",
  ])) as webcrypto.CryptoKeyPair;
  // A unique name per CA: a client trusting another one fails as "unknown issuer", not oddly.
  const commonName =
    options.commonName ??
    `bearer-proxy interception CA ${new Date(nowMs).toISOString().slice(0, 10)} ${randomBytes(3).toString("hex")}`;
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  const certificate = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: serial.toString("hex"),
      name: [{ CN: [commonName] }],
      notBefore: new Date(nowMs - 60 * 60 * 1000),
      notAfter: new Date(nowMs + (options.validityDays ?? GENERATED_CA_VALIDITY_DAYS) * DAY_MS),
      signingAlgorithm: algorithm,
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
          true,
        ),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      ],
    },
    crypto,
  );
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey));
  const body =
    pkcs8
      .toString("base64")
      .match(/.{1,64}/g)
      ?.join("\n") ?? "";
  return {
    certPem: `${certificate.toString("pem")}\n`,
    keyPem: `-----BEGIN PRIVATE KEY-----\n${body}\n-----END PRIVATE KEY-----\n`,
  };
}

/**
 * Write `ca` into `dir` (made with mode 0700 when missing) as GENERATED_CA_FILES; never
 * overwrites (a CA that clients already trust must not vanish by accident).
 */
export async function writeInterceptCa(
  dir: string,
  ca: GeneratedCa,
): Promise<{ certFile: string; keyFile: string }> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const certFile = join(dir, GENERATED_CA_FILES.cert);
  const keyFile = join(dir, GENERATED_CA_FILES.key);
  for (const file of [certFile, keyFile]) {
    if (existsSync(file)) {
      throw new Error(
        `${file} exists: refusing to overwrite a CA that clients may trust (remove it or choose another directory)`,
      );
    }
  }
  // `wx` still: two runs racing must not both write.
  await writeFile(keyFile, ca.keyPem, { flag: "wx", mode: 0o600 });
  await writeFile(certFile, ca.certPem, { flag: "wx", mode: 0o644 });
  return { certFile, keyFile };
}
