/**
 * The interception CA (`intercept.caCertFile` / `caKeyFile`): read once, checked as a whole, and
 * held for signing leaf certificates. The start-up check (config/validate-intercept.ts) and the
 * loader ask the same function, so a CA refused by `validate` is refused at start for the same
 * reason, naming the same file.
 *
 * Whoever holds this key can impersonate any host to every client that trusts the certificate
 * (bearer-proxy signs only for intercepted hosts; the key can sign anything): a key readable by
 * group or others is refused, the key is kept off the object's
 * enumerable properties (no log serializer can walk into it), and messages name files, never
 * their contents.
 */
import type { KeyObject, X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { BearerProxyError } from "../errors.js";
import { checkReadableFile } from "./readable-file.js";
import { readPemFile } from "./tls-files.js";

/** `intercept` as the runtime config holds it (absolute paths). */
export interface InterceptCaFiles {
  caCertFile: string;
  caKeyFile: string;
}

/** How the CA signs: RSASSA-PKCS1-v1_5 with SHA-256 for RSA, ECDSA with SHA-256 for P-256. */
export type CaKeyKind = "rsa" | "ec-p256";

/** What the status page and the metrics show of the CA: public facts only. */
export interface CaSummary {
  subject: string;
  /** SHA-256 of the certificate's DER, colon-separated uppercase hex (as browsers show it). */
  fingerprintSha256: string;
  notBefore: Date;
  notAfter: Date;
  /** `RSA 2048` or `EC P-256`. */
  key: string;
  certFile: string;
}

/** A loaded, checked CA. `privateKey` is not enumerable: JSON and log serializers never see it. */
export interface InterceptCa extends CaSummary {
  /** The signing certificate (caCertFile's first). */
  certificate: X509Certificate;
  /** caCertFile's certificates, the signing one first: sent after every leaf. */
  chainPem: string;
  keyKind: CaKeyKind;
  /** The private key: never logged, shown or counted. */
  readonly privateKey: KeyObject;
}

/** One problem with one of the two files. */
export interface CaProblem {
  field: "caCertFile" | "caKeyFile";
  message: string;
}

/** What a CA key may be, for messages. */
export const CA_KEYS_SUPPORTED = "an RSA key of at least 2048 bits or an EC P-256 key";

const MIN_RSA_BITS = 2048;
const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/**
 * Read and check both files: every problem found, or the CA. Checks: the key file is readable by
 * its owner only (POSIX mode & 0o077 = 0), an unencrypted PEM key, RSA ≥ 2048 or EC P-256; the
 * certificate is a CA (basicConstraints cA, and keyCertSign when keyUsage is present), valid at
 * `nowMs`, and belongs to the key. `warnings`: what strict verifiers refuse in a usable CA.
 */
export async function readInterceptCa(
  files: InterceptCaFiles,
  nowMs: number = Date.now(),
): Promise<
  | { ca: InterceptCa; problems?: undefined; warnings: CaProblem[] }
  | { problems: CaProblem[]; warnings: CaProblem[] }
> {
  const problems: CaProblem[] = [];
  const warnings: CaProblem[] = [];
  // Unreadable files get the words every other file field gets.
  const [certUnreadable, keyUnreadable] = await Promise.all([
    checkReadableFile(files.caCertFile),
    checkReadableFile(files.caKeyFile),
  ]);
  if (certUnreadable !== undefined) problems.push({ field: "caCertFile", message: certUnreadable });
  if (keyUnreadable !== undefined) problems.push({ field: "caKeyFile", message: keyUnreadable });
  const cert =
    certUnreadable === undefined
      ? await readCaCertificate(files.caCertFile, nowMs, problems, warnings)
      : undefined;
  const key = keyUnreadable === undefined ? readCaKey(files.caKeyFile, problems) : undefined;
  if (cert && key && !cert.certificate.checkPrivateKey(key.privateKey)) {
    problems.push({
      field: "caKeyFile",
      message: `expected the private key of the certificate in caCertFile (${files.caCertFile}), found another key in ${files.caKeyFile}`,
    });
  }
  if (problems.length > 0 || !cert || !key) return { problems, warnings };
  const { certificate } = cert;
  const ca = {
    subject: certificate.subject.replaceAll("\n", ", "),
    fingerprintSha256: certificate.fingerprint256,
    notBefore: new Date(certificate.validFrom),
    notAfter: new Date(certificate.validTo),
    key: key.label,
    certFile: files.caCertFile,
    certificate,
    chainPem: cert.chainPem,
    keyKind: key.kind,
  } as InterceptCa;
  Object.defineProperty(ca, "privateKey", { value: key.privateKey, enumerable: false });
  return { ca, warnings };
}

/** `readInterceptCa`, throwing BP_ERR_INTERCEPT_CA with every problem (for the start). */
export async function loadInterceptCa(
  files: InterceptCaFiles,
  nowMs: number = Date.now(),
): Promise<InterceptCa> {
  const result = await readInterceptCa(files, nowMs);
  if (result.problems === undefined) return result.ca;
  throw new BearerProxyError(
    "BP_ERR_INTERCEPT_CA",
    `the interception CA cannot be used: ${result.problems.map((p) => `intercept.${p.field}: ${p.message}`).join("; ")}`,
  );
}

/** The public facts of a CA (for /status), without the key. */
export function caSummary(ca: InterceptCa): CaSummary {
  return {
    subject: ca.subject,
    fingerprintSha256: ca.fingerprintSha256,
    notBefore: ca.notBefore,
    notAfter: ca.notAfter,
    key: ca.key,
    certFile: ca.certFile,
  };
}

async function readCaCertificate(
  file: string,
  nowMs: number,
  problems: CaProblem[],
  warnings: CaProblem[],
): Promise<{ certificate: X509Certificate; chainPem: string } | undefined> {
  const problem = (message: string) => problems.push({ field: "caCertFile", message });
  const read = readPemFile(file, "cert");
  if (read.problem !== undefined) {
    problem(read.problem);
    return undefined;
  }
  if (!("firstCertificate" in read)) return undefined;
  const certificate = read.firstCertificate;
  const name = certificate.subject.replaceAll("\n", ", ");
  let refused = false;
  // Read here rather than node's `ca`, which (OpenSSL's X509_check_ca) also says false for a CA
  // without keyCertSign: each gets its own message.
  const { isCa, signsCertificates, strictGaps } = await caExtensions(certificate);
  if (!isCa) {
    refused = true;
    problem(
      `expected a CA certificate (basicConstraints CA:TRUE), found one for "${name}" that is not a CA in ${file}; make one with \`bearer-proxy intercept-ca --generate DIR\``,
    );
  } else if (signsCertificates === false) {
    refused = true;
    problem(
      `expected a CA certificate whose keyUsage includes keyCertSign, found one for "${name}" without it in ${file}`,
    );
  }
  const notBefore = Date.parse(certificate.validFrom);
  const notAfter = Date.parse(certificate.validTo);
  if (notAfter <= nowMs) {
    refused = true;
    problem(
      `expected a CA certificate valid now, found one that expired on ${new Date(notAfter).toISOString()} in ${file}`,
    );
  } else if (notBefore > nowMs) {
    refused = true;
    problem(
      `expected a CA certificate valid now, found one valid only from ${new Date(notBefore).toISOString()} in ${file}`,
    );
  }
  if (refused) return undefined;
  if (strictGaps.length > 0) {
    warnings.push({
      field: "caCertFile",
      message: `the CA certificate in ${file} has ${strictGaps.join(", ")}: clients that verify strictly (OpenSSL's X509_STRICT, Python 3.13 and later by default) refuse every certificate it signs; \`bearer-proxy intercept-ca --generate\` and \`openssl req -x509\` make CAs with all three`,
    });
  }
  const text = readFileSync(file, "latin1");
  const chainPem = `${(text.match(CERTIFICATE_BLOCK) ?? []).join("\n")}\n`;
  return { certificate, chainPem };
}

/**
 * basicConstraints cA, keyUsage keyCertSign (RFC 5280 §4.2.1.3; undefined without keyUsage), and
 * what RFC 5280 wants of a CA that strict verifiers enforce (OpenSSL `check_extensions`).
 */
async function caExtensions(
  certificate: X509Certificate,
): Promise<{ isCa: boolean; signsCertificates: boolean | undefined; strictGaps: string[] }> {
  // @peculiar/x509 (with its ASN.1 stack) loads only for a configured CA: node:crypto has no
  // reader for either extension.
  const x509 = await import("@peculiar/x509");
  const parsed = new x509.X509Certificate(certificate.raw);
  const constraints = parsed.getExtension(x509.BasicConstraintsExtension);
  const usage = parsed.getExtension(x509.KeyUsagesExtension);
  const strictGaps = [
    ...(constraints?.critical === true ? [] : ["basicConstraints not marked critical"]),
    ...(usage === null ? ["no keyUsage extension"] : []),
    ...(parsed.getExtension(x509.SubjectKeyIdentifierExtension) === null
      ? ["no subjectKeyIdentifier"]
      : []),
  ];
  return {
    strictGaps,
    isCa: constraints?.ca === true,
    signsCertificates:
      usage === null ? undefined : (usage.usages & x509.KeyUsageFlags.keyCertSign) !== 0,
  };
}

function readCaKey(
  file: string,
  problems: CaProblem[],
): { privateKey: KeyObject; kind: CaKeyKind; label: string } | undefined {
  const problem = (message: string) => problems.push({ field: "caKeyFile", message });
  const exposed = exposedMode(file);
  if (exposed !== undefined) {
    problem(
      `expected a key file only its owner can read, found mode ${exposed} on ${file} (group or others can read it); run \`chmod 600 ${file}\``,
    );
  }
  const read = readPemFile(file, "key");
  if (read.problem !== undefined) {
    problem(read.problem);
    return undefined;
  }
  if (!("key" in read)) return undefined;
  const privateKey = read.key;
  const details = privateKey.asymmetricKeyDetails;
  if (privateKey.asymmetricKeyType === "rsa" && (details?.modulusLength ?? 0) >= MIN_RSA_BITS) {
    return { privateKey, kind: "rsa", label: `RSA ${details?.modulusLength}` };
  }
  if (privateKey.asymmetricKeyType === "ec" && details?.namedCurve === "prime256v1") {
    return { privateKey, kind: "ec-p256", label: "EC P-256" };
  }
  problem(`expected ${CA_KEYS_SUPPORTED}, found ${describeKey(privateKey)} in ${file}`);
  return undefined;
}

/** The file's permission bits as octal text when group or others may read or write it. */
function exposedMode(file: string): string | undefined {
  // Windows has no POSIX modes: node reports 0o666 for every writable file.
  if (process.platform === "win32") return undefined;
  try {
    const mode = statSync(file).mode & 0o777;
    return (mode & 0o077) === 0 ? undefined : `0${mode.toString(8).padStart(3, "0")}`;
  } catch {
    return undefined; // unreadable or missing: readPemFile says so
  }
}

function describeKey(key: KeyObject): string {
  const details = key.asymmetricKeyDetails;
  switch (key.asymmetricKeyType) {
    case "rsa":
      return `an RSA key of ${details?.modulusLength} bits`;
    case "ec":
      return `an EC key on ${CURVE_NAMES[details?.namedCurve ?? ""] ?? details?.namedCurve ?? "an unknown curve"}`;
    case "rsa-pss":
      return "an RSA-PSS-restricted key (CA signatures here are RSASSA-PKCS1-v1_5)";
    default:
      return `a ${key.asymmetricKeyType ?? "secret"} key`;
  }
}

const CURVE_NAMES: Readonly<Record<string, string>> = {
  prime256v1: "P-256",
  secp384r1: "P-384",
  secp521r1: "P-521",
  secp256k1: "secp256k1",
};
