/**
 * Readiness is a policy (readiness.requireTokens): a sidecar without its token is not ready; a
 * gateway stays in rotation when one tenant's credential fails; /readyz on a large configuration
 * answers with a summary and a bounded list of the not-ready upstreams.
 */
import { afterEach, describe, expect, it } from "vitest";
import { READYZ_LIST_LIMIT } from "../../src/admin/readiness.js";
import { type App, buildApp } from "../../src/app/build-app.js";
import { loadConfig } from "../../src/config/load.js";
import type { UpstreamConfig } from "../../src/config/proxy-config.js";
import { DEMO_CLIENT } from "../../src/emulator/emulator.js";
import { createLogger } from "../../src/observability/logger.js";
import { createMetrics } from "../../src/observability/metrics.js";
import type { TokenStatus } from "../../src/token/token-provider.js";
import { useEmulator } from "../helpers/emulator.js";
import {
  buildTestAdmin,
  failedStatus,
  idleStatus,
  makeUpstreamConfig,
  type TestAdmin,
  validStatus,
} from "./helpers.js";

const LAZY = { mode: "lazy", decidedBy: "eagerLimit" } as const;
const PREFETCH = { mode: "prefetch", decidedBy: "eagerLimit" } as const;

function gateway(count: number): UpstreamConfig[] {
  return Array.from({ length: count }, (_, i) => makeUpstreamConfig(`svc-${i}`));
}

describe("readiness policy", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  it("none (a gateway): one failing lazy credential among many leaves the gateway ready, and shows", async () => {
    const upstreams = gateway(200);
    const statuses: Record<string, TokenStatus> = {};
    for (const u of upstreams) statuses[u.name] = idleStatus();
    statuses["svc-0"] = validStatus("t0");
    statuses["svc-150"] = failedStatus("BP_ERR_TOKEN_REJECTED", "answered 401 (invalid_client)");
    admin = buildTestAdmin({
      upstreams,
      statuses,
      readiness: { requireTokens: "none", chosenBy: "several-clients" },
      tokenModes: Object.fromEntries(upstreams.map((u, i) => [u.name, i < 100 ? PREFETCH : LAZY])),
    });
    const res = await admin.app.inject({ url: "/readyz" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      status: "ready",
      requireTokens: "none",
      summary: {
        upstreams: 200,
        ready: 199,
        notReady: 1,
        blocking: 0,
        byState: { valid: 1, idle: 198, failed: 1 },
      },
      upstreams: [
        {
          name: "svc-150",
          ready: false,
          required: false,
          state: "failed",
          reason: "no usable token: token fetch failing",
          lastError: {
            code: "BP_ERR_TOKEN_REJECTED",
            message: "answered 401 (invalid_client)",
          },
        },
      ],
    });
    // The failure is where it belongs: /status counts it and lists it first.
    const status = (await admin.app.inject({ url: "/status?state=failing" })).json();
    expect(status.ready).toBe(true);
    expect(status.summary.byState.failed).toBe(1);
    expect(status.summary.problems[0]).toMatchObject({ name: "svc-150", state: "failed" });
    expect(status.upstreams.map((u: { name: string }) => u.name)).toEqual(["svc-150"]);
  });

  it("all (a sidecar): no token means not ready", async () => {
    admin = buildTestAdmin({
      statuses: { files: failedStatus("BP_ERR_TOKEN_NETWORK", "connect ECONNREFUSED") },
    });
    expect(admin.config.readiness).toEqual({ requireTokens: "all", chosenBy: "one-client" });
    const res = await admin.app.inject({ url: "/readyz" });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ status: "not_ready", summary: { blocking: 1 } });
  });

  it("prefetched: a prefetched credential's failure counts, a lazy one's does not", async () => {
    const upstreams = [makeUpstreamConfig("eager"), makeUpstreamConfig("lazy")];
    admin = buildTestAdmin({
      upstreams,
      statuses: {
        eager: validStatus("t"),
        lazy: failedStatus("BP_ERR_TOKEN_NETWORK", "connect ECONNREFUSED"),
      },
      readiness: { requireTokens: "prefetched", chosenBy: "config" },
      tokenModes: { eager: PREFETCH, lazy: LAZY },
    });
    expect((await admin.app.inject({ url: "/readyz" })).statusCode).toBe(200);
    admin.statuses.set("eager", failedStatus("BP_ERR_TOKEN_NETWORK", "connect ECONNREFUSED"));
    const res = await admin.app.inject({ url: "/readyz" });
    expect(res.statusCode).toBe(503);
    expect(res.json().summary).toMatchObject({ notReady: 2, blocking: 1 });
  });

  it("bounds the /readyz body of a large configuration: summary, not-ready names first, a count of the rest", async () => {
    const upstreams = gateway(10_000);
    const statuses: Record<string, TokenStatus> = {};
    for (const u of upstreams) statuses[u.name] = validStatus(`t-${u.name}`);
    for (let i = 0; i < 300; i++) {
      statuses[`svc-${i * 7}`] = failedStatus("BP_ERR_TOKEN_HTTP", "answered 500");
    }
    admin = buildTestAdmin({
      upstreams,
      statuses,
      readiness: { requireTokens: "all", chosenBy: "config" },
    });
    const res = await admin.app.inject({ url: "/readyz" });
    expect(res.statusCode).toBe(503);
    const body = res.json();
    expect(body.summary).toEqual({
      upstreams: 10_000,
      ready: 9_700,
      notReady: 300,
      blocking: 300,
      byState: { valid: 9_700, failed: 300 },
    });
    expect(body.upstreams).toHaveLength(READYZ_LIST_LIMIT);
    expect(body.upstreams[0]).toMatchObject({ name: "svc-0", ready: false });
    expect(body.omitted).toBe(300 - READYZ_LIST_LIMIT);
    expect(res.body.length).toBeLessThan(20_000);
  });

  it("lists readiness conditions that do not hold (e.g. overload) and is unready for them", async () => {
    const { createAdminServer } = await import("../../src/admin/admin-server.js");
    const base = buildTestAdmin();
    await base.app.close();
    const app = createAdminServer({
      config: base.config,
      upstreamNames: ["files"],
      upstreams: base.config.upstreams,
      tokenStatus: () => validStatus("t"),
      lifecycle: base.lifecycle,
      metrics: base.metrics,
      logger: createLogger({ level: "silent", format: "json" }),
      onQuit: () => {},
      startedAtWallMs: 0,
      version: "test",
      readinessConditions: () => [
        { name: "overload", ready: false, reason: "queue full for 30 s" },
      ],
    });
    const res = await app.inject({ url: "/readyz" });
    expect(res.statusCode).toBe(503);
    expect(res.json().conditions).toEqual([
      { name: "overload", ready: false, reason: "queue full for 30 s" },
    ]);
    await app.close();
  });
});

describe("readiness defaults per shape, through the real app", () => {
  const emulator = useEmulator();
  const apps: App[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close(0)));
  });

  async function start(upstreams: string): Promise<App> {
    const config = await loadConfig({
      configText: `listen: { port: 0 }\nadmin: { port: 0 }\nupstreams:\n${upstreams}`,
      env: {},
    });
    const app = buildApp(config, {
      logger: createLogger({ level: "silent", format: "json" }),
      metrics: createMetrics({ collectProcessMetrics: false }),
    });
    apps.push(app);
    await app.listen();
    return app;
  }

  function upstream(name: string, secret: string, extra = ""): string {
    const e = emulator();
    return `  - name: ${name}
    baseUrl: ${e.url}
    clientId: ${DEMO_CLIENT.clientId}
    clientSecret: ${secret}
    tls: { caFile: ${e.caFile} }
    match: { hosts: [${name}.internal] }
${extra}`;
  }

  async function settle(app: App, name: string): Promise<string> {
    const deadline = performance.now() + 10_000;
    for (;;) {
      const state = app.tokens.statuses().get(name)?.state ?? "none";
      if (state === "valid" || state === "failed") return state;
      if (performance.now() > deadline) return state;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it("a one-client sidecar whose token fetch fails is not ready", async () => {
    const app = await start(upstream("api", "wrong-secret"));
    expect(app.config.readiness.chosenBy).toBe("one-client");
    expect(await settle(app, "api")).toBe("failed");
    const res = await app.admin.inject({ url: "/readyz" });
    expect(res.statusCode).toBe(503);
    expect(res.json().upstreams[0]).toMatchObject({ name: "api", state: "failed" });
  });

  it("a gateway of several clients stays ready while one tenant's token fails", async () => {
    const app = await start(
      [
        upstream("good", DEMO_CLIENT.clientSecret),
        upstream("broken", "wrong-secret").replace(
          `clientId: ${DEMO_CLIENT.clientId}`,
          "clientId: another-client",
        ),
      ].join(""),
    );
    expect(app.config.readiness).toEqual({ requireTokens: "none", chosenBy: "several-clients" });
    expect(await settle(app, "good")).toBe("valid");
    expect(await settle(app, "broken")).toBe("failed");
    const res = await app.admin.inject({ url: "/readyz" });
    expect(res.statusCode).toBe(200);
    expect(res.json().summary).toMatchObject({ notReady: 1, blocking: 0 });
    const status = (await app.admin.inject({ url: "/status?state=failed" })).json();
    expect(status.upstreams.map((u: { name: string }) => u.name)).toEqual(["broken"]);
  });
});
