/**
 * Interception CAs for tests, good and each broken in one way, written as the operator would
 * keep them: certificate 0644, key 0600 (unless the case is about the mode). The good EC CA is
 * the product's own `--generate` CA; the others come from selfsigned, which can make what the
 * product refuses to.
 */
import { createPrivateKey, generateKeyPairSync } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generate } from "selfsigned";
import { afterAll } from "vitest";
import { generateInterceptCa } from "../../src/intercept/generate-ca.js";

export type CaVariant =
  | "ec-p256"
  | "rsa-2048"
  | "rsa-1024"
  | "ec-p384"
  | "not-a-ca"
  | "no-key-cert-sign"
  | "expired"
  | "encrypted-key"
  | "mismatched-key";

export interface CaFiles {
  caCertFile: string;
  caKeyFile: string;
  certPem: string;
  keyPem: string;
  dir: string;
}

const DAY_MS = 24 * 60 * 60 * 1000;

const CA_EXTENSIONS = [
  { name: "basicConstraints", cA: true, critical: true },
  { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
] as const;

/** Certificate and key PEM of one variant. */
export async function makeCa(variant: CaVariant): Promise<{ certPem: string; keyPem: string }> {
  const name = [{ name: "commonName", value: `test interception CA (${variant})` }];
  const base = { algorithm: "sha256", extensions: [...CA_EXTENSIONS] };
  const pems = (r: { cert: string; private: string }) => ({ certPem: r.cert, keyPem: r.private });
  switch (variant) {
    case "ec-p256":
      return generateInterceptCa({ commonName: "test interception CA (ec-p256)" });
    case "rsa-2048":
      return pems(await generate(name, { ...base, keyType: "rsa", keySize: 2048 }));
    case "rsa-1024":
      return pems(await generate(name, { ...base, keyType: "rsa", keySize: 1024 }));
    case "ec-p384":
      return pems(await generate(name, { ...base, keyType: "ec", curve: "P-384" }));
    case "not-a-ca":
      return pems(
        await generate(name, {
          ...base,
          keyType: "ec",
          extensions: [
            { name: "basicConstraints", cA: false, critical: true },
            { name: "keyUsage", digitalSignature: true, critical: true },
          ],
        }),
      );
    case "no-key-cert-sign":
      return pems(
        await generate(name, {
          ...base,
          keyType: "ec",
          extensions: [
            { name: "basicConstraints", cA: true, critical: true },
            { name: "keyUsage", digitalSignature: true, cRLSign: true, critical: true },
          ],
        }),
      );
    case "expired":
      return pems(
        await generate(name, {
          ...base,
          keyType: "ec",
          notBeforeDate: new Date(Date.now() - 10 * DAY_MS),
          notAfterDate: new Date(Date.now() - DAY_MS),
        }),
      );
    case "encrypted-key": {
      const ca = await generateInterceptCa({ commonName: "test interception CA (encrypted)" });
      const keyPem = createPrivateKey(ca.keyPem).export({
        format: "pem",
        type: "pkcs8",
        cipher: "aes-256-cbc",
        passphrase: "not-given-to-the-proxy",
      }) as string;
      return { certPem: ca.certPem, keyPem };
    }
    case "mismatched-key": {
      const ca = await generateInterceptCa({ commonName: "test interception CA (mismatched)" });
      const other = generateKeyPairSync("ec", { namedCurve: "P-256" });
      return {
        certPem: ca.certPem,
        keyPem: other.privateKey.export({ format: "pem", type: "pkcs8" }) as string,
      };
    }
  }
}

/**
 * A temp folder per test file, removed after it. `writeCa` puts a variant's two files into a
 * fresh sub-folder: `intercept-ca.pem` (0644) and `intercept-ca-key.pem` (`keyMode`, 0600).
 */
export function useCaFiles(prefix = "bp-intercept-"): {
  writeCa(variant: CaVariant, options?: { keyMode?: number }): Promise<CaFiles>;
  dir(): string;
} {
  const root = mkdtempSync(join(tmpdir(), prefix));
  let count = 0;
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  return {
    dir: () => root,
    async writeCa(variant, options = {}) {
      const { certPem, keyPem } = await makeCa(variant);
      const folder = join(root, `${variant}-${count++}`);
      mkdirSync(folder);
      const caCertFile = join(folder, "intercept-ca.pem");
      const caKeyFile = join(folder, "intercept-ca-key.pem");
      writeFileSync(caCertFile, certPem, { mode: 0o644 });
      writeFileSync(caKeyFile, keyPem, { mode: 0o600 });
      // writeFileSync's mode passes through the umask; chmod sets it exactly.
      chmodSync(caKeyFile, options.keyMode ?? 0o600);
      return { caCertFile, caKeyFile, certPem, keyPem, dir: folder };
    },
  };
}
