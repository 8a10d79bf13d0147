/**
 * What the TLS files of a config must hold. Node accepts a `ca` without a single certificate in
 * it and then verifies against the system roots alone, so a wrong file (a key, a DER file, an
 * empty one) would only surface as "unable to verify" on the first request. Checked at load,
 * with the field's path. Messages name files, never their contents (a key file is a secret).
 */
import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";

/** `ca`: trusted certificates; `cert`: a client certificate (chain); `key`: its private key. */
export type PemKind = "ca" | "cert" | "key";

/** What a TLS file held: a problem, or what parsed (kept for the certificate/key pair check). */
export type PemFile =
  | { problem: string }
  | { problem?: undefined; firstCertificate: X509Certificate }
  | { problem?: undefined; key: KeyObject };

const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;
const PRIVATE_KEY_BLOCK = /-----BEGIN [A-Z ]*PRIVATE KEY-----/;
/**
 * PKCS#8 `ENCRYPTED PRIVATE KEY`, or a traditional (OpenSSL) key with `Proc-Type: 4,ENCRYPTED`.
 * Told apart by the text: OpenSSL 3 answers a missing passphrase with "interrupted or
 * cancelled", which says nothing of it.
 */
const ENCRYPTED_KEY = /-----BEGIN ENCRYPTED PRIVATE KEY-----|^Proc-Type: *4, *ENCRYPTED/m;
const ENCRYPTED_KEY_PROBLEM = (file: string) =>
  `expected an unencrypted PEM private key, found an encrypted one in ${file} (decrypt it with \`openssl pkey -in FILE -out FILE.plain\`)`;

/** Read and parse `file` once, as `kind` needs it. */
export function readPemFile(file: string, kind: PemKind): PemFile {
  let text: string;
  try {
    text = readFileSync(file, "latin1");
  } catch (error) {
    return {
      problem: `expected a readable file, found ${file} unreadable (${(error as Error).message})`,
    };
  }
  return kind === "key" ? readPrivateKey(file, text) : readCertificates(file, text);
}

function readCertificates(file: string, text: string): PemFile {
  const blocks = text.match(CERTIFICATE_BLOCK) ?? [];
  if (blocks.length === 0) {
    const hint = PRIVATE_KEY_BLOCK.test(text)
      ? " (it holds a private key)"
      : text.trim() === ""
        ? " (it is empty)"
        : /^-----BEGIN /m.test(text)
          ? ""
          : " (not PEM text; convert DER with `openssl x509 -inform der -in FILE -out FILE.pem`)";
    return {
      problem: `expected PEM certificates ("-----BEGIN CERTIFICATE-----"), found none in ${file}${hint}`,
    };
  }
  const certificates: X509Certificate[] = [];
  for (const [i, block] of blocks.entries()) {
    try {
      certificates.push(new X509Certificate(block));
    } catch (error) {
      return {
        problem: `expected PEM certificates, but certificate ${i + 1} of ${blocks.length} in ${file} does not parse (${(error as Error).message})`,
      };
    }
  }
  return { firstCertificate: certificates[0]! };
}

function readPrivateKey(file: string, text: string): PemFile {
  if (!PRIVATE_KEY_BLOCK.test(text)) {
    return {
      problem: `expected a PEM private key ("-----BEGIN PRIVATE KEY-----"), found none in ${file}`,
    };
  }
  if (ENCRYPTED_KEY.test(text)) return { problem: ENCRYPTED_KEY_PROBLEM(file) };
  try {
    return { key: createPrivateKey({ key: text, format: "pem" }) };
  } catch (error) {
    const message = (error as Error).message;
    if (/passphrase/i.test(message)) return { problem: ENCRYPTED_KEY_PROBLEM(file) };
    return {
      problem: `expected a PEM private key, but the key in ${file} does not parse (${message})`,
    };
  }
}
