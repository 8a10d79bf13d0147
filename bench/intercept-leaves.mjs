/**
 * Leaf certificate minting for CONNECT interception (issue 34), from dist/: what a terminated
 * CONNECT pays for its host's certificate.
 *   - first leaf: loads @peculiar/x509, imports the CA key into WebCrypto, makes the P-256 leaf
 *     key, signs one certificate and builds its TLS context (once per process);
 *   - new host: one more leaf (sign + SecureContext), median of --hosts hosts;
 *   - cached: a host whose leaf is in the cache (every handshake after the first, for 12 h);
 * for an EC P-256 CA (the --generate kind) and an RSA 2048 one, each in a fresh process so the
 * first-leaf figure includes the module load. The split: signing alone vs tls.createSecureContext.
 *
 *   npm run build && node bench/intercept-leaves.mjs [--hosts 200]
 */
import { execFileSync } from "node:child_process";
import { createPublicKey, generateKeyPairSync, webcrypto } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSecureContext } from "node:tls";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const { values } = parseArgs({
  options: {
    hosts: { type: "string", default: "200" },
    child: { type: "string" },
  },
});
const hosts = Number(values.hosts);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

if (values.child) {
  const [certFile, keyFile] = values.child.split(",");
  const { loadInterceptCa } = await import(`${ROOT}dist/config/intercept-ca.js`);
  const { createLeafCertificates } = await import(`${ROOT}dist/intercept/leaf-certificates.js`);
  const ca = await loadInterceptCa({ caCertFile: certFile, caKeyFile: keyFile });
  const leaves = createLeafCertificates({ ca });
  let t = performance.now();
  const first = await leaves.leafFor("first.example.test");
  const firstMs = performance.now() - t;
  const perHost = [];
  for (let i = 0; i < hosts; i++) {
    t = performance.now();
    await leaves.leafFor(`host-${i}.example.test`);
    perHost.push(performance.now() - t);
  }
  const lookups = 100_000;
  t = performance.now();
  for (let i = 0; i < lookups; i++) await leaves.leafFor(`host-${i % hosts}.example.test`);
  const cachedUs = ((performance.now() - t) / lookups) * 1000;
  const contexts = [];
  for (let i = 0; i < 100; i++) {
    t = performance.now();
    createSecureContext({ cert: first.certPem, key: first.keyPem });
    contexts.push(performance.now() - t);
  }
  process.stdout.write(
    JSON.stringify({
      ca: ca.key,
      firstMs,
      newHostMs: median(perHost),
      secureContextMs: median(contexts),
      cachedUs,
    }),
  );
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), "bp-bench-leaves-"));
try {
  const { generateInterceptCa } = await import(`${ROOT}dist/intercept/generate-ca.js`);
  const ec = await generateInterceptCa();
  const rsaKey = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
  const rsa = await rsaCa(rsaKey);
  const rows = [];
  for (const [name, pair] of [
    ["ec", ec],
    ["rsa", rsa],
  ]) {
    const certFile = join(dir, `${name}.pem`);
    const keyFile = join(dir, `${name}-key.pem`);
    writeFileSync(certFile, pair.certPem);
    writeFileSync(keyFile, pair.keyPem);
    chmodSync(keyFile, 0o600);
    const out = execFileSync(process.execPath, [
      fileURLToPath(import.meta.url),
      "--child",
      `${certFile},${keyFile}`,
      "--hosts",
      String(hosts),
    ]);
    rows.push(JSON.parse(out.toString()));
  }
  console.log(`node ${process.version}, ${hosts} hosts`);
  console.log(
    "| CA | first leaf (ms) | new host (ms, median) | of which SecureContext (ms) | cached (µs) |",
  );
  console.log("|---|---|---|---|---|");
  for (const r of rows) {
    console.log(
      `| ${r.ca} | ${r.firstMs.toFixed(1)} | ${r.newHostMs.toFixed(2)} | ${r.secureContextMs.toFixed(2)} | ${r.cachedUs.toFixed(2)} |`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

/** A self-signed RSA 2048 CA (with the extensions the loader wants), via @peculiar/x509. */
async function rsaCa(privateKey) {
  const x509 = await import("@peculiar/x509");
  const algorithm = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
  const pkcs8 = privateKey.export({ format: "der", type: "pkcs8" });
  const spki = createPublicKey(privateKey).export({ format: "der", type: "spki" });
  const keys = {
    privateKey: await webcrypto.subtle.importKey("pkcs8", pkcs8, algorithm, true, ["sign"]),
    publicKey: await webcrypto.subtle.importKey("spki", spki, algorithm, true, ["verify"]),
  };
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      name: "CN=bench RSA CA",
      notBefore: new Date(Date.now() - 3_600_000),
      notAfter: new Date(Date.now() + 86_400_000),
      signingAlgorithm: algorithm,
      keys,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webcrypto),
      ],
    },
    webcrypto,
  );
  return {
    certPem: cert.toString("pem"),
    keyPem: `-----BEGIN PRIVATE KEY-----\n${pkcs8
      .toString("base64")
      .match(/.{1,64}/g)
      .join("\n")}\n-----END PRIVATE KEY-----\n`,
  };
}
