/**
 * A throw-away CA and a server certificate for 127.0.0.1 / localhost, written to a temp dir, so
 * every competitor verifies the upstream's certificate against a real chain (no verify=off).
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import selfsigned from "selfsigned";

const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Generate the CA and the leaf into `dir`.
 * @returns {Promise<{caFile: string, certFile: string, keyFile: string, caPem: string,
 *   certPem: string, keyPem: string}>}
 */
export async function createBenchCertificates(dir) {
  const notBeforeDate = new Date(Date.now() - DAY_MS);
  const notAfterDate = new Date(Date.now() + 7 * DAY_MS);
  const ca = await selfsigned.generate([{ name: "commonName", value: "bearer-proxy bench CA" }], {
    keySize: 2048,
    algorithm: "sha256",
    notBeforeDate,
    notAfterDate,
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
  });
  const leaf = await selfsigned.generate([{ name: "commonName", value: "localhost" }], {
    keySize: 2048,
    algorithm: "sha256",
    notBeforeDate,
    notAfterDate,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: "basicConstraints", cA: false, critical: true },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: [
          { type: 2, value: "localhost" },
          { type: 7, ip: "127.0.0.1" },
        ],
      },
    ],
  });
  const files = {
    caFile: join(dir, "ca.pem"),
    certFile: join(dir, "server-cert.pem"),
    keyFile: join(dir, "server-key.pem"),
  };
  await writeFile(files.caFile, ca.cert);
  await writeFile(files.certFile, leaf.cert);
  await writeFile(files.keyFile, leaf.private, { mode: 0o644 });
  return { ...files, caPem: ca.cert, certPem: leaf.cert, keyPem: leaf.private };
}
