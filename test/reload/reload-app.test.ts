/**
 * App.reload on a real app: routes added, removed and changed while requests run (none may
 * fail), token sources of unchanged credentials kept (no token request), an added credential
 * prefetched, an invalid configuration rejected with the old one still serving, and a listener
 * change refused whole as needing a restart.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { Agent, request } from "undici";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type App, buildApp } from "../../src/app/build-app.js";
import { loadConfig } from "../../src/config/load.js";
import { DEMO_CLIENT } from "../../src/emulator/emulator.js";
import { createMetrics } from "../../src/observability/metrics.js";
import { reloadOnce } from "../../src/reload/reload-on-change.js";
import { createCapturingLogger } from "../helpers/app-under-test.js";
import { useEmulator } from "../helpers/emulator.js";

const OTHER = { clientId: "other-client", clientSecret: "other-secret-0123456789" };
const THIRD = { clientId: "third-client", clientSecret: "third-secret-0123456789" };

describe("App.reload", () => {
  const emulator = useEmulator({ clients: [DEMO_CLIENT, OTHER, THIRD] });
  let dir: string;
  let caFile: string;
  const agent = new Agent({ connections: 16 });
  const apps: App[] = [];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "bp-reload-"));
    caFile = join(dir, "ca.pem");
    writeFileSync(caFile, emulator().caPem);
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close(0)));
  });
  afterAll(async () => {
    await agent.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const upstream = (name: string, client: { clientId: string; clientSecret: string }) => ({
    name,
    baseUrl: emulator().url,
    clientId: client.clientId,
    clientSecret: client.clientSecret,
    match: { pathPrefix: `/${name}` },
    stripPrefix: true,
    tls: { caFile },
  });

  const configOf = (upstreams: Record<string, unknown>[], extra: Record<string, unknown> = {}) =>
    loadConfig({
      configText: JSON.stringify({
        listen: { host: "127.0.0.1", port: 0 },
        admin: { host: "127.0.0.1", port: 0 },
        ...extra,
        upstreams,
      }),
      env: {},
      cwd: dir,
    });

  async function start(upstreams: Record<string, unknown>[]) {
    const captured = createCapturingLogger();
    const app = buildApp(await configOf(upstreams), {
      logger: captured.logger,
      metrics: createMetrics({ collectProcessMetrics: false }),
    });
    apps.push(app);
    const addresses = await app.listen();
    const url = `http://127.0.0.1:${addresses.proxy[0]!.port}`;
    const adminUrl = `http://127.0.0.1:${addresses.admin.port}`;
    return { app, url, adminUrl, captured };
  }

  const statusOf = async (url: string) => {
    const response = await request(url, { dispatcher: agent });
    await response.body.dump();
    return response.statusCode;
  };

  async function waitFor(check: () => boolean, what: string, timeoutMs = 10_000) {
    const deadline = performance.now() + timeoutMs;
    while (!check()) {
      if (performance.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  const tokenValid = (app: App, name: string) => app.tokens.statuses().get(name)?.state === "valid";

  const reloadsCounted = async (app: App) =>
    Object.fromEntries(
      (await app.metrics.configReloadsTotal.get()).values.map((v) => [v.labels.outcome, v.value]),
    );

  it("adds, removes and changes routes under load with no failed request and no token request for kept credentials", async () => {
    const { app, url, adminUrl } = await start([
      upstream("a", DEMO_CLIENT),
      { ...upstream("b", DEMO_CLIENT), match: { pathPrefix: "/b" } },
      upstream("gone", OTHER),
    ]);
    await waitFor(() => tokenValid(app, "a") && tokenValid(app, "gone"), "tokens at start");
    const tokenRequestsBefore = emulator().stats().tokenRequests.total;

    // Load: 8 workers on the route that stays, until the reload is done and settled.
    let stop = false;
    let sent = 0;
    const failures: string[] = [];
    const worker = async () => {
      while (!stop) {
        sent++;
        try {
          const status = await statusOf(`${url}/a/echo/load-${sent}`);
          if (status !== 200) failures.push(`status ${status}`);
        } catch (error) {
          failures.push((error as Error).message);
        }
      }
    };
    const workers = Array.from({ length: 8 }, worker);
    await waitFor(() => sent > 100, "load running");

    const next = await configOf([
      upstream("a", DEMO_CLIENT),
      // Same upstream and credential, another route.
      { ...upstream("b", DEMO_CLIENT), match: { pathPrefix: "/bee" } },
      upstream("added", THIRD),
    ]);
    const reloadStartMs = performance.now();
    expect(await app.reload(next, "file")).toEqual({ outcome: "applied" });
    const reloadMs = performance.now() - reloadStartMs;
    const sentAtReload = sent;
    await waitFor(() => sent > sentAtReload + 200, "load after the reload");
    stop = true;
    await Promise.all(workers);

    console.log(
      `reload under load: ${sent} requests (${sentAtReload} before the swap), ${failures.length} failed; reload applied in ${reloadMs.toFixed(1)} ms`,
    );
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(300);
    // The added credential prefetches like at start, without any request.
    await waitFor(() => tokenValid(app, "added"), "added credential prefetched");
    expect(emulator().stats().tokenRequests.total - tokenRequestsBefore).toBe(1);
    expect(tokenValid(app, "a")).toBe(true);

    expect(await statusOf(`${url}/added/echo/x`)).toBe(200);
    expect(await statusOf(`${url}/bee/echo/x`)).toBe(200);
    expect(await statusOf(`${url}/gone/echo/x`)).toBe(404);
    expect(await statusOf(`${url}/b/echo/x`)).toBe(404);
    // Still only the added credential's one token request.
    expect(emulator().stats().tokenRequests.total - tokenRequestsBefore).toBe(1);

    const status = (await (await request(`${adminUrl}/status`)).body.json()) as {
      lastReload: Record<string, unknown>;
      upstreams: { name: string }[];
    };
    expect(status.lastReload).toMatchObject({ trigger: "file", outcome: "applied" });
    expect(status.upstreams.map((u) => u.name).sort()).toEqual(["a", "added", "b"]);
    expect(await reloadsCounted(app)).toEqual({ applied: 1 });
    const metrics = await (await request(`${adminUrl}/metrics`)).body.text();
    expect(metrics).toMatch(/^bearer_proxy_config_reloads_total\{outcome="applied"\} 1$/m);
  }, 60_000);

  it("a request that started before the reload finishes on the removed upstream's token and pool", async () => {
    // Its own pool settings: the removed upstream's dispatcher is one nothing else uses.
    const { app, url } = await start([
      upstream("a", DEMO_CLIENT),
      { ...upstream("gone", OTHER), connections: 3 },
    ]);
    await waitFor(() => tokenValid(app, "a") && tokenValid(app, "gone"), "tokens at start");
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    async function* slowBody() {
      yield Buffer.from("first half, ");
      await released;
      yield Buffer.from("second half");
    }
    // The dispatcher is looked up after the reload, on the routing the request started with.
    const inFlight = request(`${url}/gone/echo/slow`, {
      method: "POST",
      // A known length: the proxy reads the whole body before it picks the dispatcher.
      headers: { "content-length": "23" },
      body: Readable.from(slowBody()),
      dispatcher: agent,
    });
    await waitFor(() => app.proxies[0]!.inFlight() === 1, "request in flight");
    const next = await configOf([upstream("a", DEMO_CLIENT)]);
    expect(await app.reload(next)).toEqual({ outcome: "applied" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    release();
    const response = await inFlight;
    const body = await response.body.text();
    expect(response.statusCode, body).toBe(200);
    expect(await statusOf(`${url}/gone/echo/x`)).toBe(404);
  });

  it("an invalid configuration is rejected with every problem; the running one keeps serving", async () => {
    const { app, url, adminUrl, captured } = await start([upstream("a", DEMO_CLIENT)]);
    await waitFor(() => tokenValid(app, "a"), "token at start");
    await reloadOnce(
      {
        app,
        logger: captured.logger,
        load: async () => ({
          config: await configOf([{ ...upstream("a", DEMO_CLIENT), baseUrl: "not a url" }]),
          warnings: [],
        }),
      },
      "SIGHUP",
    );
    expect(await statusOf(`${url}/a/echo/x`)).toBe(200);
    expect(await reloadsCounted(app)).toEqual({ rejected: 1 });
    const status = (await (await request(`${adminUrl}/status`)).body.json()) as {
      lastReload: { outcome: string; trigger: string; problems: string[] };
    };
    expect(status.lastReload).toMatchObject({ trigger: "SIGHUP", outcome: "rejected" });
    expect(status.lastReload.problems.join("\n")).toMatch(/baseUrl/);
    const logged = captured.records.find((r) => r.outcome === "rejected");
    expect(String(logged?.msg)).toMatch(/invalid configuration[\s\S]*baseUrl/);
  });

  it("a listener change needs a restart: nothing of the new configuration applies", async () => {
    const { app, url } = await start([upstream("a", DEMO_CLIENT)]);
    const next = await configOf([upstream("a", DEMO_CLIENT), upstream("added", THIRD)], {
      listen: { host: "127.0.0.1", port: 1 },
    });
    expect(await app.reload(next)).toEqual({ outcome: "restart_required", paths: ["listen"] });
    expect(await statusOf(`${url}/a/echo/x`)).toBe(200);
    expect(await statusOf(`${url}/added/echo/x`)).toBe(404);
    expect(app.config.upstreams.map((u) => u.name)).toEqual(["a"]);
    expect(await reloadsCounted(app)).toEqual({ restart_required: 1 });
  });
});
