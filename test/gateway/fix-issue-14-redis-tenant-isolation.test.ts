/**
 * Issue 14, defect 5: two upstreams with the same client id and secret but a different tenant
 * (a token header, or a TLS client certificate) must never get each other's token through the
 * shared Redis cache. The token endpoint here really issues per-tenant tokens, and the upstream
 * records which token each route received.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { type RedisServer, skipWithoutRedis, startRedisServer } from "../helpers/redis-server.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";

describe.skipIf(skipWithoutRedis)("issue 14: tenants never share a token through Redis", () => {
  let pki: TestPki;
  let redis: RedisServer;
  let server: FakeUpstream;
  /** Replicas of one Deployment see the same file paths: one CA file for every app here. */
  let dir: string;
  let caFile: string;
  const issued: string[] = [];
  const agent = new Agent();
  const apps: AppUnderTest[] = [];

  /** POST /token issues `tok-<tenant>-<n>`; anything else echoes the Authorization it got. */
  function handler(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    req.on("end", () => {
      if (req.method === "POST" && req.url === "/token") {
        const tenant = String(req.headers["x-tenant"] ?? "none");
        const token = `tok-${tenant}-${issued.length + 1}`;
        issued.push(token);
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ access_token: token, expires_in: 599, token_type: "Bearer" }));
        return;
      }
      res.writeHead(200, { "content-type": "text/plain" });
      res.end(req.headers.authorization ?? "");
    });
  }

  beforeAll(async () => {
    pki = await createTestPki();
    dir = mkdtempSync(join(tmpdir(), "bp-tenants-"));
    caFile = join(dir, "ca.pem");
    writeFileSync(caFile, pki.caPem);
    [redis, server] = await Promise.all([
      startRedisServer(),
      startFakeUpstream({ cert: pki.good, handler }),
    ]);
  }, 30_000);

  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await agent.close();
    await redis?.stop();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const tenant = (name: string, extra: Record<string, unknown>) => ({
    name,
    baseUrl: server.origin,
    tokenPath: "/token",
    clientId: "shared-client",
    clientSecret: "shared-secret",
    match: { pathPrefix: `/${name}` },
    stripPrefix: true,
    token: { prefetch: false },
    ...extra,
    tls: { caFile, ...(extra.tls as object | undefined) },
  });

  async function waitForRedisUp(app: AppUnderTest): Promise<void> {
    for (let i = 0; i < 200; i++) {
      const metrics = await (await request(`${app.adminUrl}/metrics`)).body.text();
      if (/^bearer_proxy_redis_up 1$/m.test(metrics)) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error("never connected to Redis");
  }

  async function authorizationSeenBy(app: AppUnderTest, path: string): Promise<string> {
    const response = await request(`${app.url}${path}`, { dispatcher: agent });
    expect(response.statusCode).toBe(200);
    return response.body.text();
  }

  it("a different token header (tenant) keys a different Redis entry", async () => {
    // Two replicas, each serving one tenant, sharing one Redis: the second must not pick up the
    // first tenant's token.
    const config = (name: string, header: string) => ({
      tokenCache: { redis: { url: redis.url, keyPrefix: "bp-tenants:" } },
      upstreams: [tenant(name, { tokenHeaders: { "x-tenant": header } })],
    });
    const [a, b] = await Promise.all([
      startAppUnderTest({ config: config("tenant-a", "a") }),
      startAppUnderTest({ config: config("tenant-b", "b") }),
    ]);
    apps.push(a, b);
    await Promise.all([waitForRedisUp(a), waitForRedisUp(b)]);
    const seenByA = await authorizationSeenBy(a, "/tenant-a/x");
    const seenByB = await authorizationSeenBy(b, "/tenant-b/x");
    expect(seenByA).toMatch(/^Bearer tok-a-/);
    expect(seenByB).toMatch(/^Bearer tok-b-/);
    // And each replica shares its own tenant's token with a replica of the same tenant.
    const a2 = await startAppUnderTest({ config: config("tenant-a", "a") });
    apps.push(a2);
    await waitForRedisUp(a2);
    expect(await authorizationSeenBy(a2, "/tenant-a/y")).toBe(seenByA);
  }, 30_000);

  it("a different TLS client identity keys a different Redis entry", async () => {
    const files = {
      "a.crt": pki.good.certPem,
      "a.key": pki.good.keyPem,
      "b.crt": pki.wrongHost.certPem,
      "b.key": pki.wrongHost.keyPem,
    };
    const app = await startAppUnderTest({
      config: {
        tokenCache: { redis: { url: redis.url, keyPrefix: "bp-mtls:" } },
        upstreams: [
          tenant("mtls-a", { tls: { certFile: "a.crt", keyFile: "a.key" } }),
          tenant("mtls-b", { tls: { certFile: "b.crt", keyFile: "b.key" } }),
        ],
      },
      files,
    });
    apps.push(app);
    await waitForRedisUp(app);
    const before = issued.length;
    const seenByA = await authorizationSeenBy(app, "/mtls-a/x");
    const seenByB = await authorizationSeenBy(app, "/mtls-b/x");
    // Each identity made its own token request and got its own token.
    expect(issued.length - before).toBe(2);
    expect(seenByB).not.toBe(seenByA);
  }, 30_000);
});
