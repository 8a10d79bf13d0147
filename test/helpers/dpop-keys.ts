/**
 * PEM private keys for `dpop.keyFile` tests, written to a fresh temporary directory: one per
 * algorithm the proxy supports, and ones it must refuse.
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

export type DpopTestKeyKind =
  | "ec-p256"
  | "ec-p384"
  | "rsa-2048"
  | "rsa-1024"
  | "ed25519"
  | "ed448"
  | "rsa-pss-2048";

export function generateDpopTestKey(kind: DpopTestKeyKind): KeyObject {
  switch (kind) {
    case "ec-p256":
      return generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
    case "ec-p384":
      return generateKeyPairSync("ec", { namedCurve: "P-384" }).privateKey;
    case "rsa-2048":
      return generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
    case "rsa-1024":
      return generateKeyPairSync("rsa", { modulusLength: 1024 }).privateKey;
    case "ed25519":
      return generateKeyPairSync("ed25519").privateKey;
    case "ed448":
      return generateKeyPairSync("ed448").privateKey;
    case "rsa-pss-2048":
      return generateKeyPairSync("rsa-pss", { modulusLength: 2048 }).privateKey;
  }
}

export interface DpopKeyDir {
  dir: string;
  /** Writes a new key of `kind` (PKCS#8 PEM) to `name` in the directory; returns the path. */
  write(name: string, kind: DpopTestKeyKind): Promise<string>;
  /** Writes `text` as is (a broken or foreign file). */
  writeText(name: string, text: string): Promise<string>;
  remove(): Promise<void>;
}

export async function createDpopKeyDir(): Promise<DpopKeyDir> {
  const dir = await mkdtemp(join(tmpdir(), "bp-dpop-"));
  const writeText = async (name: string, text: string) => {
    const path = join(dir, name);
    await writeFile(path, text, { mode: 0o600 });
    return path;
  };
  return {
    dir,
    write: (name, kind) =>
      writeText(name, generateDpopTestKey(kind).export({ format: "pem", type: "pkcs8" }) as string),
    writeText,
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
