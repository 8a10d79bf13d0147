/**
 * buildApp's wiring: token requests use the token endpoint's own TLS settings, a failed listen
 * leaves nothing bound, and /status shows the shared Redis cache's state.
 */
import { once } from "node:events";
import { createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { type App, buildApp } from "../../src/app/build-app.js";
import { loadConfig } from "../../src/config/load.js";
import { DEMO_CLIENT } from "../../src/emulator/emulator.js";
import { createLogger } from "../../src/observability/logger.js";
import { createMetrics } from "../../src/observability/metrics.js";
import { useEmulator } from "../helpers/emulator.js";

const logger = createLogger({ level: "silent", format: "json" });
const apps: App[] = [];
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close(0)));
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

function build(configText: string): Promise<App> {
  return loadConfig({ configText, env: {} }).then((config) => {
    const app = buildApp(config, {
      logger,
      metrics: createMetrics({ collectProcessMetrics: false }),
    });
    apps.push(app);
    return app;
  });
}

/** One upstream that fetches no token until used (nothing listens at its base URL), plus `extra`. */
function lazyUpstreamConfig(extra: string): string {
  return `
listen: { port: 0 }
${extra.includes("admin:") ? "" : "admin: { port: 0 }\n"}${extra}
upstreams:
  - name: api
    baseUrl: https://127.0.0.1:1
    clientId: id
    clientSecret: secret
    token: { prefetch: false }
`;
}

async function occupiedPort(): Promise<number> {
  const server = createServer();
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return (server.address() as { port: number }).port;
}

async function waitFor(check: () => boolean | Promise<boolean>, timeoutMs = 3_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("buildApp wiring", () => {
  const emulator = useEmulator();

  it("verifies a token endpoint on another host as itself, not with the upstream's tls.serverName", async () => {
    const port = new URL(emulator().url).port;
    const app = await build(`
admin: { port: 0 }
listen: { port: 0 }
upstreams:
  - name: api
    baseUrl: https://127.0.0.1:1
    tokenUrl: https://localhost:${port}/iam/v1/oauth2/token
    clientId: ${DEMO_CLIENT.clientId}
    clientSecret: ${DEMO_CLIENT.clientSecret}
    tls: { caFile: ${emulator().caFile}, serverName: upstream.internal }
`);
    await app.listen();
    const status = () => app.tokens.statuses().get("api");
    await waitFor(() => status()?.state === "valid" || status()?.state === "failed");
    expect(status()?.lastError?.message).toBeUndefined();
    expect(status()?.state).toBe("valid");
  });

  it("closes the listeners it opened when another one cannot bind", async () => {
    const taken = await occupiedPort();
    const app = await build(lazyUpstreamConfig(`admin: { port: ${taken} }`));
    await expect(app.listen()).rejects.toMatchObject({
      code: "BP_ERR_LISTEN",
      listener: { kind: "admin" },
      reason: "EADDRINUSE",
      message: `the admin listener cannot listen on 127.0.0.1:${taken}: the address is already in use (another process listens there)`,
    });
    expect(app.proxies.every((proxy) => !proxy.server.listening)).toBe(true);
  });

  it("shows the Redis cache state on /status when tokenCache.redis is configured", async () => {
    // A port that was free a moment ago: connections to it are refused.
    const closedPort = await occupiedPort();
    await new Promise((resolve) => servers.pop()?.close(resolve));
    const app = await build(
      lazyUpstreamConfig(`tokenCache: { redis: { url: "redis://127.0.0.1:${closedPort}" } }`),
    );
    const cacheState = async () =>
      (await app.admin.inject({ url: "/status" })).json().sharedTokenCache?.state;
    expect(["connecting", "down"]).toContain(await cacheState());
    await waitFor(async () => (await cacheState()) === "down");
  });
});
