/**
 * What the TLS files of a config must hold. Node accepts a `ca` without a single certificate in
 * it and then verifies against the system roots alone, so a wrong file (a key, a DER file, an
 * empty one) would only surface as "unable to verify" on the first request. Checked at load,
 * with the field's path. Messages name files, never their contents (a key file is a secret).
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";

/** `ca`: trusted certificates; `cert`: a client certificate (chain); `key`: its private key. */
export type PemKind = "ca" | "cert" | "key";

const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** Undefined when `file` holds what `kind` needs, else what is wrong. */
export function checkPemFile(file: string, kind: PemKind): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, "latin1");
  } catch (error) {
    return `expected a readable file, found ${file} unreadable (${(error as Error).message})`;
  }
  return kind === "key" ? checkPrivateKey(file, text) : checkCertificates(file, text);
}

function checkCertificates(file: string, text: string): string | undefined {
  const blocks = text.match(CERTIFICATE_BLOCK) ?? [];
  if (blocks.length === 0) {
    const hint = /-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text)
      ? " (it holds a private key)"
      : text.trim() === ""
        ? " (it is empty)"
        : /^-----BEGIN /m.test(text)
          ? ""
          : " (not PEM text; convert DER with `openssl x509 -inform der -in FILE -out FILE.pem`)";
    return `expected PEM certificates ("-----BEGIN CERTIFICATE-----"), found none in ${file}${hint}`;
  }
  for (const [i, block] of blocks.entries()) {
    try {
      new X509Certificate(block);
    } catch (error) {
      return `expected PEM certificates, but certificate ${i + 1} of ${blocks.length} in ${file} does not parse (${(error as Error).message})`;
    }
  }
  return undefined;
}

function checkPrivateKey(file: string, text: string): string | undefined {
  if (!/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(text)) {
    return `expected a PEM private key ("-----BEGIN PRIVATE KEY-----"), found none in ${file}`;
  }
  try {
    createPrivateKey({ key: text, format: "pem" });
    return undefined;
  } catch (error) {
    const message = (error as Error).message;
    if (/passphrase/i.test(message)) {
      return `expected an unencrypted PEM private key, found an encrypted one in ${file} (decrypt it with \`openssl pkey -in FILE -out FILE.plain\`)`;
    }
    return `expected a PEM private key, but the key in ${file} does not parse (${message})`;
  }
}

/** Undefined when the first certificate of `certFile` belongs to the key in `keyFile`. */
export function checkCertificateMatchesKey(certFile: string, keyFile: string): string | undefined {
  try {
    const text = readFileSync(certFile, "latin1");
    const first = text.match(CERTIFICATE_BLOCK)?.[0];
    if (!first) return undefined; // reported for certFile already
    const key = createPrivateKey({ key: readFileSync(keyFile, "latin1"), format: "pem" });
    if (new X509Certificate(first).checkPrivateKey(key)) return undefined;
    return `expected the private key of the certificate in tls.certFile (${certFile}), found another key in ${keyFile}`;
  } catch {
    return undefined; // parse problems are reported per file
  }
}
