/**
 * Issue 22: the readiness default counts credentials (what the token registry shares a token by),
 * not client ids. One client asking for an audience per upstream is a gateway: the IdP refusing
 * one audience leaves it in rotation. One credential, however many routes use it, is a sidecar:
 * its failure still makes the proxy unready.
 */
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { evaluateReadiness } from "../../src/admin/readiness.js";
import { type App, buildApp } from "../../src/app/build-app.js";
import { loadConfig } from "../../src/config/load.js";
import { readinessConfig } from "../../src/config/readiness-defaults.js";
import { DEMO_CLIENT } from "../../src/emulator/emulator.js";
import { createLogger } from "../../src/observability/logger.js";
import { createMetrics } from "../../src/observability/metrics.js";
import { emptyTokenStatus } from "../../src/token/token-status.js";
import { useEmulator } from "../helpers/emulator.js";

const REFUSED = "https://billing.example.com";

describe("readiness default by credential, through the real app", () => {
  const emulator = useEmulator();
  const apps: App[] = [];
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close(0)));
    emulator().refuseAudiences([]);
  });

  async function start(upstreams: string): Promise<{ app: App; proxyPort: number }> {
    const config = await loadConfig({
      configText: `listen: { port: 0 }\nadmin: { port: 0 }\nupstreams:\n${upstreams}`,
      env: {},
    });
    const app = buildApp(config, {
      logger: createLogger({ level: "silent", format: "json" }),
      metrics: createMetrics({ collectProcessMetrics: false }),
    });
    apps.push(app);
    const { proxy } = await app.listen();
    return { app, proxyPort: proxy[0]!.port };
  }

  /** An upstream of the demo client asking for `audience`. */
  function upstream(name: string, audience: string): string {
    const e = emulator();
    return `  - name: ${name}
    baseUrl: ${e.url}
    clientId: ${DEMO_CLIENT.clientId}
    clientSecret: ${DEMO_CLIENT.clientSecret}
    tokenParams: { audience: "${audience}" }
    tls: { caFile: ${e.caFile} }
    match: { hosts: [${name}.internal] }
`;
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

  async function get(proxyPort: number, host: string): Promise<{ status: number; body: string }> {
    const res = await request(`http://127.0.0.1:${proxyPort}/platform/v1/spreadsheets/1`, {
      headers: { host },
    });
    return { status: res.statusCode, body: await res.body.text() };
  }

  it("one client, an audience per upstream: the refused audience leaves the gateway ready", async () => {
    emulator().refuseAudiences([REFUSED]);
    const { app, proxyPort } = await start(
      [
        upstream("files", "https://files.example.com"),
        upstream("billing", REFUSED),
        upstream("reports", "https://reports.example.com"),
      ].join(""),
    );
    expect(app.config.readiness).toEqual({ requireTokens: "none", chosenBy: "several-clients" });
    expect(await settle(app, "files")).toBe("valid");
    expect(await settle(app, "reports")).toBe("valid");
    expect(await settle(app, "billing")).toBe("failed");

    const res = await app.admin.inject({ url: "/readyz" });
    expect(res.statusCode).toBe(200);
    expect(res.json().summary).toMatchObject({ upstreams: 3, notReady: 1, blocking: 0 });
    const billing = res.json().upstreams.find((u: { name: string }) => u.name === "billing");
    expect(billing).toMatchObject({
      ready: false,
      required: false,
      state: "failed",
      lastError: { code: "token_rejected" },
    });
    // Ready because it can serve: the other audiences' routes work, the refused one answers
    // for itself.
    expect((await get(proxyPort, "files.internal")).status).toBe(200);
    expect((await get(proxyPort, "reports.internal")).status).toBe(200);
    const refused = await get(proxyPort, "billing.internal");
    expect(refused.status).toBe(502);
    expect(refused.body).toContain("token_rejected");
  });

  it("one credential behind several routes is still a sidecar: its refusal makes it unready", async () => {
    emulator().refuseAudiences([REFUSED]);
    const { app } = await start([upstream("api", REFUSED), upstream("api-v2", REFUSED)].join(""));
    expect(app.config.readiness).toEqual({ requireTokens: "all", chosenBy: "one-client" });
    expect(await settle(app, "api")).toBe("failed");
    expect(await settle(app, "api-v2")).toBe("failed");
    const res = await app.admin.inject({ url: "/readyz" });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({
      status: "not_ready",
      requireTokens: "all",
      summary: { upstreams: 2, notReady: 2, blocking: 2 },
    });
  });

  it("one credential, one upstream: the classic sidecar goes unready when its credential fails", async () => {
    emulator().refuseAudiences([REFUSED]);
    const { app } = await start(upstream("api", REFUSED));
    expect(app.config.readiness).toEqual({ requireTokens: "all", chosenBy: "one-client" });
    expect(await settle(app, "api")).toBe("failed");
    const res = await app.admin.inject({ url: "/readyz" });
    expect(res.statusCode).toBe(503);
    expect(res.json().upstreams[0]).toMatchObject({
      name: "api",
      ready: false,
      state: "failed",
      lastError: { code: "token_rejected" },
    });
  });
});

describe("readiness default by credential, 10,000 upstreams", () => {
  const COUNT = 10_000;

  /** `COUNT` upstreams of one client id; `audienceOf(i)` is upstream i's audience. */
  function configText(audienceOf: (i: number) => string): string {
    const lines = ["upstreams:"];
    for (let i = 0; i < COUNT; i++) {
      lines.push(
        `  - { name: svc-${i}, baseUrl: "https://api.example.com", clientId: one-client, clientSecret: s, tokenParams: { audience: "${audienceOf(i)}" }, match: { hosts: [svc-${i}.internal] } }`,
      );
    }
    return lines.join("\n");
  }

  async function measure(audienceOf: (i: number) => string) {
    const text = configText(audienceOf);
    const loadStart = performance.now();
    const config = await loadConfig({ configText: text, env: {} });
    const loadMs = performance.now() - loadStart;
    const decideStart = performance.now();
    const decided = readinessConfig(undefined, config.upstreams);
    const decideMs = performance.now() - decideStart;
    expect(config.upstreams).toHaveLength(COUNT);
    expect(decided).toEqual(config.readiness);
    return { config, loadMs, decideMs };
  }

  it("distinct audiences: several credentials, so none; one refused audience leaves /readyz 200", async () => {
    const { config, loadMs, decideMs } = await measure((i) => `https://api-${i}.example.com`);
    expect(config.readiness).toEqual({ requireTokens: "none", chosenBy: "several-clients" });

    const upstreams = config.upstreams.map((u, i) => ({
      name: u.name,
      mode: i < 100 ? ("prefetch" as const) : ("lazy" as const),
      status:
        i === 7
          ? { ...emptyTokenStatus("idle"), state: "failed" as const }
          : emptyTokenStatus("idle"),
    }));
    const evaluateStart = performance.now();
    const readiness = evaluateReadiness({
      phase: "running",
      requireTokens: config.readiness.requireTokens,
      upstreams,
    });
    const evaluateMs = performance.now() - evaluateStart;
    expect(readiness.statusCode).toBe(200);
    console.log(
      `${COUNT} upstreams, one client id, distinct audiences: load+normalize ${loadMs.toFixed(0)} ms, default ${decideMs.toFixed(2)} ms, /readyz decision ${evaluateMs.toFixed(2)} ms`,
    );
  });

  it("one audience throughout: one credential, so all", async () => {
    const { config, loadMs, decideMs } = await measure(() => "https://api.example.com");
    expect(config.readiness).toEqual({ requireTokens: "all", chosenBy: "one-client" });
    console.log(
      `${COUNT} upstreams, one credential: load+normalize ${loadMs.toFixed(0)} ms, default ${decideMs.toFixed(2)} ms`,
    );
  });

  it("one audience but the last: several credentials, so none", async () => {
    const { config, loadMs, decideMs } = await measure((i) =>
      i === COUNT - 1 ? "https://other.example.com" : "https://api.example.com",
    );
    expect(config.readiness).toEqual({ requireTokens: "none", chosenBy: "several-clients" });
    console.log(
      `${COUNT} upstreams, the last one differing: load+normalize ${loadMs.toFixed(0)} ms, default ${decideMs.toFixed(2)} ms`,
    );
  });
});
