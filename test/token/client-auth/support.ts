/**
 * Shared setup of the client-authentication tests: temp files, keys, a token source, and the
 * world most of them run in (a verifying token endpoint over TLS).
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generate } from "selfsigned";
import type { UpstreamConfig } from "../../../src/config/proxy-config.js";
import type { UpstreamConfigFile } from "../../../src/config/schema.js";
import { createDispatcherPool, type DispatcherPool } from "../../../src/net/dispatcher-pool.js";
import type { TokenProvider } from "../../../src/token/token-provider.js";
import { createTokenSource } from "../../../src/token/token-source.js";
import { createTestPki, type TestPki } from "../../helpers/tls.js";
import { makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { useResource } from "../../helpers/use-resource.js";
import { captureLogs } from "../helpers.js";
import {
  type RegisteredClient,
  startVerifyingEndpoint,
  type VerifyingEndpoint,
} from "./verifying-endpoint.js";

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

/** A test CA, a token endpoint that verifies client authentication, and a workspace. */
export interface VerifyingWorld {
  pki: TestPki;
  endpoint: VerifyingEndpoint;
  ws: Workspace;
  /** The test CA as a file, in `ws`. */
  caFile: string;
  /** `sourceFor` a client of `endpoint`, trusting the test CA (`tls.caFile`). */
  source(file: Partial<UpstreamConfigFile>): SourceUnderTest;
}

/**
 * The world of the test file: started before its tests, stopped after them. `clientCa` makes the
 * endpoint ask for client certificates signed by the test CA (tls-client-auth); `clients` are
 * registered from the start (tests may register more through `endpoint.clients`).
 */
export function useVerifyingWorld(
  options: { clientCa?: boolean; clients?: Record<string, RegisteredClient> } = {},
): VerifyingWorld {
  const world = useResource(
    "useVerifyingWorld: the world",
    async () => {
      const pki = await createTestPki();
      const endpoint = await startVerifyingEndpoint({
        ...pki.good,
        ...(options.clientCa ? { clientCaPem: pki.caPem } : {}),
        clients: options.clients ?? {},
      });
      const ws = workspace();
      return { pki, endpoint, ws, caFile: ws.write("ca.pem", pki.caPem) };
    },
    async ({ endpoint, ws }) => {
      await endpoint.close();
      ws.cleanup();
    },
  );
  return {
    get pki() {
      return world().pki;
    },
    get endpoint() {
      return world().endpoint;
    },
    get ws() {
      return world().ws;
    },
    get caFile() {
      return world().caFile;
    },
    source: (file) =>
      sourceFor({ tokenUrl: world().endpoint.tokenUrl, tls: { caFile: world().caFile }, ...file }),
  };
}
