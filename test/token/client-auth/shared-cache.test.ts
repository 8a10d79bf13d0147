/**
 * The Redis shared cache with secretless methods (issue 16): private-key-jwt derives the token
 * encryption key from the private key (as replicas share it), the same key in another PEM
 * rendering gives the same AES key, another key another one; client-assertion-file tokens are
 * never shared (each pod's assertion differs), said once in the log.
 */
import { createPrivateKey } from "node:crypto";
import { Agent } from "undici";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { sharedCacheSecret } from "../../../src/token/client-auth/shared-cache-secret.js";
import type { GetOrFetchArgs, SharedTokenCache } from "../../../src/token/shared-token-cache.js";
import { createSharedTokenSourceFactory } from "../../../src/token/shared-token-source.js";
import type { TokenProvider } from "../../../src/token/token-provider.js";
import { makeTokenSpec } from "../../helpers/upstream-config.js";
import { captureLogs, DEFAULT_POLICY } from "../helpers.js";
import { makeKeyPair, workspace } from "./support.js";

const agent = new Agent();
const ws = workspace();
let sources: TokenProvider[] = [];
afterEach(() => {
  for (const s of sources) s.close();
  sources = [];
});
afterAll(async () => {
  ws.cleanup();
  await agent.close();
});

function recordingCache() {
  const calls: GetOrFetchArgs[] = [];
  const cache: SharedTokenCache = {
    getOrFetch: async (args) => {
      calls.push(args);
      return {
        accessToken: "shared-token",
        tokenType: "Bearer",
        scope: undefined,
        obtainedAtWallMs: Date.now(),
        expiresAtWallMs: Date.now() + 600_000,
      };
    },
    state: () => "up",
    close: async () => {},
  };
  return { cache, calls };
}

describe("shared cache key material of the secretless methods", () => {
  it("private-key-jwt: derived from the key itself, independent of its PEM rendering, and shared", async () => {
    const pair = makeKeyPair("ec");
    const sec1 = createPrivateKey(pair.privatePem)
      .export({ type: "sec1", format: "pem" })
      .toString();
    const a = sharedCacheSecret("private-key-jwt", {
      clientId: "x",
      clientKeyPem: pair.privatePem,
    });
    const b = sharedCacheSecret("private-key-jwt", { clientId: "x", clientKeyPem: sec1 });
    const other = sharedCacheSecret("private-key-jwt", {
      clientId: "x",
      clientKeyPem: makeKeyPair("ec").privatePem,
    });
    expect(a).toBeDefined();
    expect(a).toBe(b);
    expect(a).not.toBe(other);

    const { cache, calls } = recordingCache();
    const spec = makeTokenSpec({
      clientSecret: undefined,
      clientAuth: "private-key-jwt",
      clientKeyFile: ws.write("shared.key", sec1),
    });
    const source = createSharedTokenSourceFactory(cache)({
      upstream: "jwt",
      spec,
      policy: DEFAULT_POLICY,
      dispatcher: agent,
      logger: captureLogs().logger,
    });
    sources.push(source);
    expect((await source.getToken()).value).toBe("shared-token");
    expect(calls).toHaveLength(1);
    expect(calls[0]!.secret).toBe(a);
  });

  it("client-assertion-file: never through Redis, and the log says so once per upstream", async () => {
    const { cache, calls } = recordingCache();
    const logs = captureLogs();
    const factory = createSharedTokenSourceFactory(cache);
    const spec = makeTokenSpec({
      clientSecret: undefined,
      clientAuth: "client-assertion-file",
      clientAssertionFile: `${ws.dir}/absent-token`,
    });
    for (let i = 0; i < 2; i++) {
      const source = factory({
        upstream: "federated",
        spec,
        policy: { ...DEFAULT_POLICY, waitTimeoutMs: 300 },
        dispatcher: agent,
        logger: logs.logger,
      });
      sources.push(source);
      // The assertion file is missing: the fetch fails locally, never reaching the cache.
      await expect(source.getToken()).rejects.toThrow(/absent-token/);
    }
    expect(calls).toHaveLength(0);
    const told = logs.records.filter((r) => /not shared through Redis/.test(r.msg));
    expect(told).toHaveLength(1);
    expect(told[0]).toMatchObject({ level: 40, upstream: "federated" });
  });
});
