import {
  type GeneratedCertificates,
  generateCertificates,
} from "../../src/emulator/certificates.js";

/** A server certificate and its key, ready for `https.createServer` or `startEmulator({ tls })`. */
export interface ServerCertificate {
  certPem: string;
  keyPem: string;
}

/**
 * Certificates for TLS verification tests. Clients trust `caPem` only; `good` passes,
 * the others each fail for exactly one reason.
 */
export interface TestPki {
  /** The CA clients are told to trust. */
  caPem: string;
  caKeyPem: string;
  /** Signed by the CA for 127.0.0.1, ::1 and localhost, valid now. */
  good: ServerCertificate;
  /** Signed by the CA, valid now, but only for `wrong-host.invalid`. */
  wrongHost: ServerCertificate;
  /** Signed by the CA for the right hosts, but expired yesterday. */
  expired: ServerCertificate;
  /** Right hosts, valid now, but signed by another CA the client does not trust. */
  otherCa: ServerCertificate & { caPem: string };
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** Make a fresh {@link TestPki} (EC keys: well under a second). */
export async function createTestPki(): Promise<TestPki> {
  const good = await generateCertificates();
  const ca = { caPem: good.caPem, caKeyPem: good.caKeyPem };
  const [wrongHost, expired, otherCa] = await Promise.all([
    generateCertificates({ ca, hosts: ["wrong-host.invalid"] }),
    generateCertificates({
      ca,
      notBefore: new Date(Date.now() - 3 * DAY_MS),
      notAfter: new Date(Date.now() - DAY_MS),
    }),
    generateCertificates(),
  ]);
  return {
    caPem: good.caPem,
    caKeyPem: good.caKeyPem,
    good: serverPart(good),
    wrongHost: serverPart(wrongHost),
    expired: serverPart(expired),
    otherCa: { ...serverPart(otherCa), caPem: otherCa.caPem },
  };
}

function serverPart(generated: GeneratedCertificates): ServerCertificate {
  return { certPem: generated.certPem, keyPem: generated.keyPem };
}

export { generateCertificates };
