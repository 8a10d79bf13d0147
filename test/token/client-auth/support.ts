/** Shared setup of the client-authentication tests: temp files, keys, a token source. */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generate } from "selfsigned";
import type { UpstreamConfigFile } from "../../../src/config/schema.js";
import type { UpstreamConfig } from "../../../src/config/types.js";
import { createDispatcherPool, type DispatcherPool } from "../../../src/net/dispatcher-pool.js";
import { createTokenSource } from "../../../src/token/token-source.js";
import type { TokenProvider } from "../../../src/token/types.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { captureLogs } from "../helpers.js";

export type KeyKind = "rsa" | "ec" | "ed25519";

export function makeKeyPair(kind: KeyKind): {
  privatePem: string;
  publicPem: string;
  key: KeyObject;
} {
  const { privateKey, publicKey } =
    kind === "rsa"
      ? generateKeyPairSync("rsa", { modulusLength: 2048 })
      : kind === "ec"
        ? generateKeyPairSync("ec", { namedCurve: "P-256" })
        : generateKeyPairSync("ed25519");
  return {
    privatePem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
    key: privateKey,
  };
}

/** A self-signed certificate for an existing RSA or EC key pair (for x5t#S256). */
export async function certificateFor(
  pair: { privatePem: string; publicPem: string },
  kind: "rsa" | "ec",
) {
  const generated = await generate([{ name: "commonName", value: "bearer-proxy test client" }], {
    keyPair: { privateKey: pair.privatePem, publicKey: pair.publicPem },
    keyType: kind,
    algorithm: "sha256",
  });
  return generated.cert;
}

export interface Workspace {
  dir: string;
  write(name: string, content: string): string;
  cleanup(): void;
}

export function workspace(): Workspace {
  const dir = mkdtempSync(join(tmpdir(), "bp-client-auth-"));
  return {
    dir,
    write(name, content) {
      const path = join(dir, name);
      writeFileSync(path, content);
      return path;
    },
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface SourceUnderTest {
  upstream: UpstreamConfig;
  source: TokenProvider;
  logs: ReturnType<typeof captureLogs>;
  pool: DispatcherPool;
  close(): Promise<void>;
}

/** A real token source for the upstream the loader builds from `file`, on the app's dispatcher pool. */
export function sourceFor(file: Partial<UpstreamConfigFile>): SourceUnderTest {
  const upstream = makeUpstreamConfig("idp", {
    baseUrl: "https://api.example.test",
    clientSecret: undefined,
    ...file,
  } as Partial<UpstreamConfigFile>);
  const pool = createDispatcherPool({ egressProxy: undefined });
  const logs = captureLogs();
  const source = createTokenSource({
    upstream: upstream.name,
    spec: upstream.token,
    policy: {
      ...upstream.tokenPolicy,
      minRefreshIntervalMs: 0,
      minAgeBeforeInvalidateMs: 0,
      // Failures answer the waiting request sooner (the tests assert what, not when).
      waitTimeoutMs: 1_000,
    },
    dispatcher: pool.forTokenEndpoint(upstream),
    logger: logs.logger,
    secretPollIntervalMs: 0,
  });
  return {
    upstream,
    source,
    logs,
    pool,
    async close() {
      source.close();
      await pool.close();
    },
  };
}
