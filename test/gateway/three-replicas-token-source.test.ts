/**
 * Issue 32: "one token request per credential" can be checked from outside. Three proxy
 * processes share one real Redis; one asks the token endpoint, the other two take its token
 * from the shared cache — and each says which, in its log (`source`), its metrics (token
 * endpoint requests vs shared-cache hits) and /status (`token.origin`).
 */
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmulator } from "../../src/emulator/emulator.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type ProxyProcess, startProxyProcesses } from "../helpers/proxy-process.js";
import { type RedisServer, skipWithoutRedis, startRedisServer } from "../helpers/redis-server.js";

const REPLICAS = 3;
const REQUESTS_PER_REPLICA = 20;

async function metricsOf(adminUrl: string): Promise<string> {
  return (await request(`${adminUrl}/metrics`)).body.text();
}

async function waitForRedisUp(adminUrl: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (/^bearer_proxy_redis_up 1$/m.test(await metricsOf(adminUrl))) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${adminUrl}: never connected to Redis`);
}

/** The value of one sample, 0 when the series does not exist. */
function sample(metrics: string, series: string): number {
  const line = metrics.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

interface LogLine {
  msg: string;
  source?: string;
  upstream?: string;
  fingerprint?: string;
  issuedAgoS?: number;
}

/** The token lines (those with a `source`) a replica logged. */
function tokenLines(replica: ProxyProcess): LogLine[] {
  return replica
    .output()
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as LogLine)
    .filter((record) => record.source !== undefined);
}

describe.skipIf(skipWithoutRedis)(
  "three replicas sharing Redis say where their token came from",
  () => {
    let emulator: Emulator;
    let redis: RedisServer;
    let replicas: ProxyProcess[] = [];
    const agent = new Agent({ connections: REQUESTS_PER_REPLICA * REPLICAS, pipelining: 0 });

    beforeAll(async () => {
      emulator = await startEmulator({ host: "127.0.0.1", port: 0 });
      redis = await startRedisServer();
      replicas = await startProxyProcesses(
        REPLICAS,
        `
listen: { host: 127.0.0.1, port: 0 }
admin: { host: 127.0.0.1, port: 0 }
log: { level: info }
shutdown: { drainDelay: 0s, timeout: 2s }
tokenCache:
  redis: { url: "${redis.url}", keyPrefix: "bp-token-source:", commandTimeout: 2s }
upstreams:
  - name: api
    baseUrl: ${emulator.url}
    clientId: demo-client
    clientSecret: demo-secret
    tls: { caFile: ${JSON.stringify(emulator.caFile)} }
    token: { prefetch: false }
`,
      );
      // Connected before the first request, as replicas of a Deployment are: the test is about
      // what each replica reports, not about who wins a race with the first connect.
      for (const replica of replicas) await waitForRedisUp(replica.adminUrl);
    }, 60_000);

    afterAll(async () => {
      await Promise.all(replicas.map((r) => r.stop()));
      await agent.close();
      await redis?.stop();
      await emulator?.close();
    });

    it("one token endpoint request in all; the other two replicas report the shared cache", async () => {
      emulator.resetStats();
      const statuses = await Promise.all(
        replicas.flatMap((replica) =>
          Array.from({ length: REQUESTS_PER_REPLICA }, async () => {
            const response = await request(`${replica.proxyUrl}/platform/v1/spreadsheets/r`, {
              dispatcher: agent,
            });
            await response.body.dump();
            return response.statusCode;
          }),
        ),
      );
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      expect(emulator.stats().tokenRequests.total).toBe(1);

      // The log: exactly one "token fetched" from the token endpoint, two shared-cache reads,
      // all of the same token.
      const lines = replicas.map(tokenLines);
      const sources = lines.map((own) => own.map((l) => l.source));
      expect(sources.flat().sort()).toEqual(["shared-cache", "shared-cache", "token-endpoint"]);
      const fetcher = sources.findIndex((own) => own.includes("token-endpoint"));
      for (const [index, own] of lines.entries()) {
        expect(own).toHaveLength(1);
        expect(own[0]).toMatchObject(
          index === fetcher
            ? { msg: "token fetched", source: "token-endpoint", upstream: "api" }
            : { msg: "token taken from the shared cache", source: "shared-cache", upstream: "api" },
        );
        if (index !== fetcher) expect(own[0]!.issuedAgoS).toBeGreaterThanOrEqual(0);
      }
      expect(new Set(lines.flat().map((l) => l.fingerprint)).size).toBe(1);

      // The metrics: token endpoint requests only where one was made; shared-cache hits apart.
      const metrics = await Promise.all(replicas.map((r) => metricsOf(r.adminUrl)));
      const fetches = metrics.map((m) =>
        sample(m, 'bearer_proxy_token_fetches_total{upstream="api",outcome="success"}'),
      );
      const hits = metrics.map((m) =>
        sample(m, 'bearer_proxy_token_shared_cache_hits_total{upstream="api"}'),
      );
      expect(fetches).toEqual(replicas.map((_, i) => (i === fetcher ? 1 : 0)));
      expect(hits).toEqual(replicas.map((_, i) => (i === fetcher ? 0 : 1)));
      for (const [i, m] of metrics.entries()) {
        expect(sample(m, 'bearer_proxy_token_fetch_duration_seconds_count{upstream="api"}')).toBe(
          i === fetcher ? 1 : 0,
        );
      }

      // /status: where the current token came from, and when.
      const reports = await Promise.all(
        replicas.map(
          async (r) =>
            (await (await request(`${r.adminUrl}/status`)).body.json()) as {
              upstreams: {
                token: {
                  fetchCount: number;
                  sharedCacheHits: number;
                  origin: { source: string; receivedAt: string; issuedAt: string } | null;
                };
              }[];
            },
        ),
      );
      const tokens = reports.map((r) => r.upstreams[0]!.token);
      const issued = tokens[fetcher]!.origin!.issuedAt;
      for (const [i, token] of tokens.entries()) {
        expect(token.origin?.source).toBe(i === fetcher ? "token-endpoint" : "shared-cache");
        expect(token.fetchCount).toBe(i === fetcher ? 1 : 0);
        expect(token.sharedCacheHits).toBe(i === fetcher ? 0 : 1);
        const { receivedAt, issuedAt } = token.origin!;
        expect(Date.parse(issuedAt)).toBeLessThanOrEqual(Date.parse(receivedAt));
        // Issued once, for all three: a shared token was issued no later than the fetcher got it.
        if (i !== fetcher) expect(Date.parse(issuedAt)).toBeLessThanOrEqual(Date.parse(issued));
      }
    }, 60_000);
  },
);
