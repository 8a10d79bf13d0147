import { randomBytes } from "node:crypto";
import { isIP } from "node:net";

/**
 * selfsigned (with @peculiar/x509 and its ASN.1 stack: ~2.5 MiB of heap) loads on the first
 * certificate made: an emulator given its certificate, as the bench's is, never needs it.
 */
const generate: typeof import("selfsigned").generate = async (...args) =>
  (await import("selfsigned")).generate(...args);

/**
 * Test and demo PKI: a CA and a server certificate it signs, via selfsigned 5 (which builds
 * certificates with @peculiar/x509 over WebCrypto). EC P-256 keys keep generation fast
 * (tens of milliseconds), which matters when tests make several.
 */

export interface CertificateOptions {
  /** DNS names and IP addresses for the server certificate's SAN. Default 127.0.0.1, ::1, localhost. */
  hosts?: string[];
  /** Validity in days from `notBefore`. Default 30. Ignored when `notAfter` is given. */
  days?: number;
  /** Start of the server certificate's validity. Default: one hour ago (tolerates clock skew). */
  notBefore?: Date;
  /** End of the server certificate's validity. Default `notBefore + days`. */
  notAfter?: Date;
  /** Sign with this existing CA instead of generating a new one. */
  ca?: { caPem: string; caKeyPem: string };
}

export interface GeneratedCertificates {
  /** The CA certificate (trust anchor for clients). */
  caPem: string;
  caKeyPem: string;
  /** The server (leaf) certificate, signed by the CA. */
  certPem: string;
  keyPem: string;
}

const DEFAULT_HOSTS = ["127.0.0.1", "::1", "localhost"];
const DAY_MS = 24 * 60 * 60 * 1000;
const KEY = { keyType: "ec", curve: "P-256", algorithm: "sha256" } as const;

/** Generate a CA (unless one is given) and a server certificate it signs. */
export async function generateCertificates(
  options: CertificateOptions = {},
): Promise<GeneratedCertificates> {
  const hosts = options.hosts ?? DEFAULT_HOSTS;
  if (hosts.length === 0) throw new TypeError("generateCertificates needs at least one host");
  const notBefore = options.notBefore ?? new Date(Date.now() - 60 * 60 * 1000);
  const notAfter =
    options.notAfter ?? new Date(notBefore.getTime() + (options.days ?? 30) * DAY_MS);
  const ca = options.ca ?? (await generateCa(notBefore, notAfter));

  const leaf = await generate(
    [{ name: "commonName", value: hosts.find((h) => !isIP(h)) ?? hosts[0]! }],
    {
      ...KEY,
      notBeforeDate: notBefore,
      notAfterDate: notAfter,
      ca: { key: ca.caKeyPem, cert: ca.caPem },
      extensions: [
        { name: "basicConstraints", cA: false, critical: true },
        { name: "keyUsage", digitalSignature: true, critical: true },
        { name: "extKeyUsage", serverAuth: true },
        {
          name: "subjectAltName",
          altNames: hosts.map((host) =>
            isIP(host) ? { type: 7, ip: host } : { type: 2, value: host },
          ),
        },
      ],
    },
  );
  return { caPem: ca.caPem, caKeyPem: ca.caKeyPem, certPem: leaf.cert, keyPem: leaf.private };
}

async function generateCa(
  notBefore: Date,
  leafNotAfter: Date,
): Promise<{ caPem: string; caKeyPem: string }> {
  // The CA outlives its leaf by a day so an expired-leaf test fails on the leaf alone.
  // A unique name per CA, so a client trusting another emulator's CA fails as "unknown issuer".
  const name = `bearer-proxy emulator CA ${randomBytes(4).toString("hex")}`;
  const ca = await generate([{ name: "commonName", value: name }], {
    ...KEY,
    notBeforeDate: new Date(Math.min(notBefore.getTime(), Date.now() - DAY_MS)),
    notAfterDate: new Date(Math.max(leafNotAfter.getTime(), Date.now()) + DAY_MS),
    extensions: [
      { name: "basicConstraints", cA: true, pathLenConstraint: 0, critical: true },
      {
        name: "keyUsage",
        keyCertSign: true,
        cRLSign: true,
        digitalSignature: true,
        critical: true,
      },
    ],
  });
  return { caPem: ca.cert, caKeyPem: ca.private };
}
