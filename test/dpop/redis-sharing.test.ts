/**
 * Issue #24 with the Redis-shared token cache (a real redis-server, a real authorization
 * server): a DPoP-bound token is shared under its key's thumbprint, so replicas with the same
 * `dpop.keyFile` (even at another path) share one token, a replica with another key never gets
 * it, and tokens of an ephemeral key (made per process) are not shared at all, said once.
 */
import { copyFile } from "node:fs/promises";
import { decodeJwt } from "jose";
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import type { DpopSpec } from "../../src/config/proxy-config.js";
import { createRedisTokenCache } from "../../src/token/redis-token-cache.js";
import { createSharedTokenSourceFactory } from "../../src/token/shared-token-source.js";
import type { TokenProvider } from "../../src/token/token-provider.js";
import {
  redisCacheConfig,
  skipWithoutRedis,
  useCacheCleanup,
  useRedisServer,
} from "../helpers/redis-server.js";
import { captureLogs } from "../token/helpers.js";
import { IMMEDIATE_POLICY, specFor, tokenStatuses, useDpopBench } from "./support.js";

describe.skipIf(skipWithoutRedis)("DPoP tokens in the shared Redis cache", () => {
  const redis = useRedisServer();
  const caches = useCacheCleanup();
  const bench = useDpopBench({ rs: {}, keys: true });
  let sources: TokenProvider[] = [];

  afterEach(() => {
    for (const source of sources) source.close();
    sources = [];
  });

  /** `n` replicas: each its own Redis connection and factory, one key prefix. */
  function replicas(n: number) {
    const config = redisCacheConfig(redis().url);
    const logs = captureLogs();
    const factories = Array.from({ length: n }, () => {
      const cache = createRedisTokenCache({ config, logger: logs.logger });
      caches.push(cache);
      return createSharedTokenSourceFactory(cache);
    });
    const sourceOn = (replica: number, dpop: Partial<DpopSpec>) => {
      const source = factories[replica]!({
        upstream: "api",
        spec: specFor(bench.as, dpop),
        policy: IMMEDIATE_POLICY,
        dispatcher: bench.agent,
        logger: logs.logger,
        secretPollIntervalMs: 0,
      });
      sources.push(source);
      return source;
    };
    return { sourceOn, logs };
  }

  const issued = () => tokenStatuses(bench.as).filter((s) => s === 200).length;

  it("shares a token between replicas holding the same key file, never with another key", async () => {
    const keyFile = await bench.keys.write("shared.pem", "ec-p256");
    const elsewhere = `${bench.keys.dir}/same-key-other-path.pem`;
    await copyFile(keyFile, elsewhere);
    const otherKey = await bench.keys.write("other.pem", "ec-p256");
    const { sourceOn } = replicas(3);

    const before = issued();
    const a = await sourceOn(0, { keyFile }).getToken();
    expect(issued()).toBe(before + 1);
    const b = await sourceOn(1, { keyFile: elsewhere }).getToken();
    expect(issued()).toBe(before + 1); // from Redis
    expect(b.value).toBe(a.value);
    expect(b.tokenType).toBe("DPoP");
    // The token read from Redis goes with this replica's own key object, the same key.
    expect(b.dpop).toBeDefined();
    expect(b.dpop).not.toBe(a.dpop);
    expect(b.dpop!.jkt).toBe(a.dpop!.jkt);

    // Replica B proves possession with its own copy of the key.
    const url = `${bench.rs.origin}/shared`;
    const response = await request(url, {
      dispatcher: bench.agent,
      headers: {
        authorization: b.dpop!.authorization(b.value),
        dpop: b.dpop!.proofFor("GET", url, b.value),
      },
    });
    expect(response.statusCode).toBe(200);
    await response.body.dump();

    // Another key: its own token, bound to its own key.
    const c = await sourceOn(2, { keyFile: otherKey }).getToken();
    expect(issued()).toBe(before + 2);
    expect(c.value).not.toBe(a.value);
    expect(decodeJwt(c.value).cnf).toEqual({ jkt: c.dpop!.jkt });
    expect(c.dpop!.jkt).not.toBe(a.dpop!.jkt);
  });

  it("does not share tokens of ephemeral keys, and says why once per upstream", async () => {
    const { sourceOn, logs } = replicas(2);
    const before = issued();
    const a = await sourceOn(0, {}).getToken();
    const b = await sourceOn(1, {}).getToken();
    expect(issued()).toBe(before + 2);
    expect(a.value).not.toBe(b.value);
    expect(a.dpop!.jkt).not.toBe(b.dpop!.jkt);
    expect(decodeJwt(b.value).cnf).toEqual({ jkt: b.dpop!.jkt });
    const told = logs.records.filter((r) => /ephemeral DPoP key/.test(r.msg));
    // Once per upstream and factory (replica): two replicas here.
    expect(told).toHaveLength(2);
    expect(told[0]!.msg).toMatch(/set dpop\.keyFile/);
  });
});
