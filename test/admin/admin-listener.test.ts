/**
 * Issue 33: the admin listener answers the probes and /metrics without fastify, and builds it on
 * the first request for anything else (src/admin/admin-listener.ts). Over real ports: every fast
 * answer equals, header for header and byte for byte, what the fastify routes answer to the same
 * request in the same state (that instance listening on a port of its own); the rest reaches
 * fastify; concurrent first requests build it once; a failed build is a logged 500 in the error
 * contract, and the next request tries again.
 */
import { connect } from "node:net";
import { Gauge } from "prom-client";
import { Agent, request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import {
  type AdminListener,
  type BuildAdminFastify,
  createAdminListener,
} from "../../src/admin/admin-listener.js";
import { createAdminServer } from "../../src/admin/admin-server.js";
import type { ReadinessConfig } from "../../src/config/proxy-config.js";
import { waitFor } from "../helpers/wait.js";
import {
  buildTestAdmin,
  failedStatus,
  makeUpstreamConfig,
  type TestAdmin,
  type TestAdminOptions,
  validStatus,
} from "./helpers.js";

/** What every JSON answer of the admin listener carries, fast path or fastify. */
const ADMIN_JSON_HEADERS = {
  "content-type": "application/json; charset=utf-8",
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
};

interface Answer {
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** The probe requests a kubelet and Prometheus send, HEAD and a query string included. */
const PROBE_REQUESTS: [method: "GET" | "HEAD", path: string][] = [
  ["GET", "/livez"],
  ["HEAD", "/livez"],
  ["GET", "/readyz"],
  ["HEAD", "/readyz"],
  ["GET", "/readyz?verbose=1"],
  ["GET", "/startup"],
  ["HEAD", "/startup"],
  ["GET", "/metrics"],
  ["HEAD", "/metrics"],
];

describe("the admin listener: probes without fastify, the rest by fastify built on first use", () => {
  let admin: TestAdmin | undefined;
  let listener: AdminListener | undefined;
  const agent = new Agent({ keepAliveTimeout: 60_000 });
  afterEach(async () => {
    await listener?.close(0);
    await admin?.app.close();
    listener = undefined;
    admin = undefined;
  });

  async function call(origin: string, method: string, path: string): Promise<Answer> {
    const res = await request(`${origin}${path}`, { method, dispatcher: agent });
    const { date, ...headers } = res.headers;
    expect(date).toBeDefined();
    return { statusCode: res.statusCode, headers, body: await res.body.text() };
  }

  async function start(options: TestAdminOptions, build?: BuildAdminFastify) {
    admin = buildTestAdmin({ processMetrics: false, ...options });
    listener = createAdminListener(admin.deps, build ? { buildFastify: build } : {});
    const { port } = await listener.listen({ host: "127.0.0.1", port: 0 });
    return { admin, listener, origin: `http://127.0.0.1:${port}` };
  }

  /** The same requests to the fast path, then to the fastify instance on its own port. */
  async function fastAndFastify(listener: AdminListener, origin: string) {
    const fast: Answer[] = [];
    for (const [method, path] of PROBE_REQUESTS) fast.push(await call(origin, method, path));
    // Nothing above needed fastify.
    expect(listener.fastifyBuilt()).toBe(false);
    const app = await listener.fastify();
    await app.listen({ host: "127.0.0.1", port: 0 });
    const { port } = app.server.address() as { port: number };
    const routed: Answer[] = [];
    for (const [method, path] of PROBE_REQUESTS) {
      routed.push(await call(`http://127.0.0.1:${port}`, method, path));
    }
    return { fast, routed };
  }

  it.each<[string, TestAdminOptions]>([
    ["ready", {}],
    [
      "not ready: a failing upstream whose error echoes the secret",
      {
        upstreams: [makeUpstreamConfig("files"), makeUpstreamConfig("sheets")],
        statuses: {
          sheets: failedStatus("BP_ERR_TOKEN_REJECTED", "invalid_client: demo-secret is wrong"),
        },
      },
    ],
    ["starting", { phase: "starting" }],
    ["draining", { phase: "draining" }],
  ])("%s: each fast answer is fastify's for the same request", async (_name, options) => {
    const { admin, listener, origin } = await start(options);
    admin.metrics.requestsTotal.inc({ upstream: "files", method: "GET", status_class: "2xx" });
    const { fast, routed } = await fastAndFastify(listener, origin);
    expect(fast).toEqual(routed);
    // The answers are the real ones, not two equal empties.
    const byRequest = Object.fromEntries(
      PROBE_REQUESTS.map(([m, p], i) => [`${m} ${p}`, fast[i]!]),
    );
    expect(byRequest["GET /livez"]).toMatchObject({ statusCode: 200, body: '{"status":"ok"}' });
    expect(byRequest["GET /livez"]!.headers).toMatchObject({
      "content-type": "application/json; charset=utf-8",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "content-length": "15",
      "keep-alive": "timeout=72",
    });
    expect(byRequest["HEAD /readyz"]!.body).toBe("");
    expect(byRequest["HEAD /readyz"]!.headers["content-length"]).toBe(
      String(Buffer.byteLength(byRequest["GET /readyz"]!.body)),
    );
    expect(byRequest["GET /metrics"]!.body).toContain(
      'bearer_proxy_requests_total{upstream="files",method="GET",status_class="2xx"} 1',
    );
    expect(fast.map((a) => a.body).join("")).not.toContain("demo-secret");
  });

  it("the not-ready and draining answers are what the probes expect", async () => {
    const { admin, origin } = await start({
      statuses: { files: failedStatus("BP_ERR_TOKEN_NETWORK", "connect ECONNREFUSED") },
    });
    const notReady = await call(origin, "GET", "/readyz");
    expect(notReady.statusCode).toBe(503);
    expect(JSON.parse(notReady.body)).toMatchObject({
      status: "not_ready",
      upstreams: [{ name: "files", ready: false, state: "failed" }],
    });
    admin.lifecycle.markDraining();
    expect(await call(origin, "GET", "/readyz")).toMatchObject({
      statusCode: 503,
      body: '{"status":"draining"}',
    });
    expect((await call(origin, "GET", "/livez")).statusCode).toBe(200);
  });

  it("reads the upstreams and readiness policy a reload put in force, as the fastify routes do", async () => {
    let upstreams = [makeUpstreamConfig("files")];
    let readiness: ReadinessConfig | undefined;
    admin = buildTestAdmin({
      processMetrics: false,
      upstreams: [makeUpstreamConfig("files"), makeUpstreamConfig("broken")],
      statuses: { broken: failedStatus("BP_ERR_TOKEN_HTTP", "answered 500") },
    });
    const deps = {
      ...admin.deps,
      currentUpstreams: () => upstreams,
      currentReadiness: () => readiness ?? admin!.config.readiness,
    };
    listener = createAdminListener(deps);
    const { port } = await listener.listen({ host: "127.0.0.1", port: 0 });
    const origin = `http://127.0.0.1:${port}`;
    const routes = createAdminServer(deps);
    try {
      const both = async (path: string) => {
        const fast = await call(origin, "GET", path);
        const routed = await routes.inject({ url: path });
        expect(fast.body).toBe(routed.body);
        expect(fast.statusCode).toBe(routed.statusCode);
        return fast;
      };
      expect((await both("/readyz")).statusCode).toBe(200);
      // A reload adds the failing upstream: unready; then waits for no token: ready again.
      upstreams = [makeUpstreamConfig("files"), makeUpstreamConfig("broken")];
      expect((await both("/readyz")).statusCode).toBe(503);
      readiness = { ...admin.config.readiness, requireTokens: "none" };
      const ready = await both("/readyz");
      expect(ready.statusCode).toBe(200);
      expect(JSON.parse(ready.body).upstreams.map((u: { name: string }) => u.name)).toEqual([
        "files",
        "broken",
      ]);
      expect((await both("/metrics")).body).not.toContain('upstream="broken"} 1');
    } finally {
      await routes.close();
    }
    expect(listener.fastifyBuilt()).toBe(false);
  });

  it("anything else reaches fastify: the 404 with the endpoints list, /status, POST on a probe path", async () => {
    const { listener, origin } = await start({ statuses: { files: validStatus("t") } });
    const missing = await call(origin, "GET", "/healthz?x=1");
    expect(missing.statusCode).toBe(404);
    expect(missing.headers).toMatchObject(ADMIN_JSON_HEADERS);
    expect(JSON.parse(missing.body).error).toMatchObject({
      code: "not_found",
      message: "no admin endpoint GET /healthz",
      endpoints: expect.arrayContaining(["GET /readyz", "GET /status", "POST /quitquitquit"]),
    });
    expect(listener.fastifyBuilt()).toBe(true);
    expect((await call(origin, "POST", "/livez")).statusCode).toBe(404);
    expect((await call(origin, "GET", "/livez/")).statusCode).toBe(404);
    const status = await call(origin, "GET", "/status");
    expect(status.statusCode).toBe(200);
    expect(JSON.parse(status.body)).toMatchObject({ ready: true, upstreams: [{ name: "files" }] });
    // inject reaches the same instance (the tests' way in).
    expect((await listener.inject({ url: "/status" })).json().ready).toBe(true);
  });

  it("concurrent first requests build fastify once", async () => {
    let builds = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { origin } = await start({}, async (deps, probes) => {
      builds++;
      await gate;
      return createAdminServer(deps, probes);
    });
    const answers = Array.from({ length: 8 }, () => call(origin, "GET", "/status"));
    // The probes do not wait for the build.
    expect((await call(origin, "GET", "/readyz")).statusCode).toBe(200);
    release();
    const settled = await Promise.all(answers);
    expect(settled.map((a) => a.statusCode)).toEqual(Array(8).fill(200));
    expect(builds).toBe(1);
    await call(origin, "GET", "/status/upstreams/files");
    expect(builds).toBe(1);
  });

  it("a failed build answers 500 in the error contract, is logged, and the next request tries again", async () => {
    let builds = 0;
    const { admin, listener, origin } = await start({}, async (deps, probes) => {
      builds++;
      if (builds === 1) throw new Error("Cannot find module './admin-server.chunk.cjs'");
      return createAdminServer(deps, probes);
    });
    const failed = await call(origin, "GET", "/status");
    expect(failed.statusCode).toBe(500);
    expect(failed.headers).toMatchObject(ADMIN_JSON_HEADERS);
    expect(JSON.parse(failed.body)).toEqual({
      error: { code: "internal_error", message: "admin endpoint failed" },
    });
    const logged = admin.logLines.map((line) => JSON.parse(line));
    expect(logged).toContainEqual(
      expect.objectContaining({
        level: "error",
        msg: "admin server could not be built",
        err: expect.objectContaining({ message: expect.stringContaining("Cannot find module") }),
      }),
    );
    expect(listener.fastifyBuilt()).toBe(false);
    // The probes never needed it; the next other request builds it.
    expect((await call(origin, "GET", "/readyz")).statusCode).toBe(200);
    expect((await call(origin, "GET", "/status")).statusCode).toBe(200);
    expect(builds).toBe(2);
  });

  it("a failing probe answers fastify's 500 and is logged", async () => {
    const { admin, origin } = await start({});
    new Gauge({
      name: "test_broken_collect",
      help: "collect throws",
      registers: [admin.metrics.registry],
      collect() {
        throw new Error("collector broke");
      },
    });
    const failed = await call(origin, "GET", "/metrics");
    expect(failed.statusCode).toBe(500);
    expect(JSON.parse(failed.body)).toEqual({
      error: { code: "internal_error", message: "admin endpoint failed" },
    });
    const routed = await admin.app.inject({ url: "/metrics" });
    expect(routed.statusCode).toBe(500);
    expect(failed.body).toBe(routed.body);
    expect(admin.logLines.join("")).toContain("collector broke");
  });

  it("a client that never finishes its headers is answered 408 and cut at limits.headersTimeout, not held for Node's default minute", async () => {
    admin = buildTestAdmin({ processMetrics: false });
    const { config } = admin.deps;
    const headersTimeoutMs = 300;
    listener = createAdminListener({
      ...admin.deps,
      config: { ...config, limits: { ...config.limits, headersTimeoutMs } },
    });
    const { port } = await listener.listen({ host: "127.0.0.1", port: 0 });
    const socket = connect(port, "127.0.0.1");
    let received = "";
    socket.setEncoding("utf8").on("data", (chunk: string) => {
      received += chunk;
    });
    await new Promise<void>((resolve) => socket.once("connect", resolve));
    const startedMs = performance.now();
    // A request line and one header, and never the empty line that ends them.
    socket.write("GET /livez HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    const closed = await new Promise<boolean>((resolve) => {
      // The deadline, plus the listener's 5 s check interval, plus a loaded machine's slack.
      const timer = setTimeout(() => resolve(false), 12_000);
      socket.once("close", () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    socket.destroy();
    // Node's defaults (a 60 s header deadline checked every 30 s) keep it open past 12 s.
    expect(closed).toBe(true);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
    expect(performance.now() - startedMs).toBeGreaterThanOrEqual(headersTimeoutMs - 50);
  });

  it("close ends idle keep-alive connections at once and lets one in flight finish with Connection: close", async () => {
    const { admin, listener, origin } = await start({});
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let collecting = false;
    new Gauge({
      name: "test_slow_collect",
      help: "collect waits for the test",
      registers: [admin.metrics.registry],
      async collect() {
        collecting = true;
        await gate;
      },
    });
    // Idle keep-alive connections: one served by the fast path, one by fastify.
    const probeClient = new Agent({ keepAliveTimeout: 60_000 });
    const statusClient = new Agent({ keepAliveTimeout: 60_000 });
    const scrapeClient = new Agent({ keepAliveTimeout: 60_000 });
    try {
      await (await request(`${origin}/livez`, { dispatcher: probeClient })).body.dump();
      await (await request(`${origin}/status`, { dispatcher: statusClient })).body.dump();
      const scrape = request(`${origin}/metrics`, { dispatcher: scrapeClient });
      // In flight once its collect runs (a fixed 50 ms could lose on a loaded machine).
      await waitFor(() => collecting, "the scrape's collect");
      const startedMs = performance.now();
      // Far beyond what the test waits: only closing the connections can end it in time.
      const closed = listener.close(60_000);
      release();
      const answer = await scrape;
      expect(answer.statusCode).toBe(200);
      expect(answer.headers.connection).toBe("close");
      await answer.body.dump();
      await closed;
      expect(performance.now() - startedMs).toBeLessThan(10_000);
      expect(listener.server.listening).toBe(false);
    } finally {
      await Promise.all([probeClient.close(), statusClient.close(), scrapeClient.close()]);
    }
  });
});
