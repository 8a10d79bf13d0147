/**
 * Issue #33: the bundle (dist/bundle/, what the image and the packed CLI run) keeps every
 * feature's code out of a start that does not use it, as the unbundled build does
 * (test/dpop/off-loads-no-dpop.test.ts, test/tracing/off-is-noop.test.ts): each such feature
 * is a chunk of its own, loaded on first use. The real bundled CLI runs with a preload that
 * writes, at exit, the files it required and Node's list of built-ins; the proxy gets a token and
 * forwards a request first, and the admin port is asked what a running sidecar's is (the probes
 * and a Prometheus scrape): fastify, which serves only the rest of the admin listener, stays out
 * (admin/admin-listener.ts), and so do the built-ins nothing on that path uses. The same harness
 * with tracing and callers on must see their chunks, and a GET /status must load fastify's, so
 * the check can't pass by seeing nothing.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { request } from "undici";
import { afterAll, describe, expect, it } from "vitest";
import { htpasswdFile } from "../helpers/callers-fixture.js";
import type { HostileWorld } from "../hostile/support/hostile-world.js";
import { type HostileWorldOptions, startHostileWorld } from "../hostile/support/hostile-world.js";
import { REPO_ROOT } from "./schema-tools.js";

const BUNDLE_CLI = join(REPO_ROOT, "dist/bundle/cli.cjs");

/** Chunks (by name, before their hash) that a plain start must not load. */
const ON_USE_ONLY = [
  "tracing-sdk",
  "dpop",
  "authenticate",
  "leaf-certificates",
  "x509",
  "emulator",
  "selfsigned",
  "lazy-redis",
  "lazy-ajv-compiler",
  "lazy-serializer-compiler",
  "lazy-inject",
  "pino-pretty",
  "thread-stream-worker",
  // fastify and the admin routes beyond the probes and /metrics.
  "admin-server",
];

/**
 * Built-ins a plain start must not load: node:fs/promises and what it brings (base/async-fs.ts;
 * `require("fs").promises` loads only the internal one), and node:zlib and node:https, which
 * prom-client's unused Pushgateway requires (scripts/build-bundle.mjs).
 */
const NOT_AT_START =
  /^NativeModule (fs\/promises|internal\/fs\/promises|internal\/readline\/.*|zlib|https)$/;

/** What a running sidecar's admin port sees: the probes, HEAD included, and a scrape. */
const PROBES = ["/livez", "/readyz", "/startup", "/metrics"];

async function adminGet(world: HostileWorld, path: string, method: "GET" | "HEAD" = "GET") {
  const answer = await request(`${world.proxy.adminUrl}${path}`, { method });
  return { statusCode: answer.statusCode, text: await answer.body.text() };
}

/** "run.D3x9_a-Q.cjs" → "run" (a chunk: name.hash.cjs), "lazy-redis.cjs" → "lazy-redis" (an entry). */
const chunkName = (file: string) =>
  basename(file)
    .replace(/\.[\w-]{8}\.cjs$/, "")
    .replace(/\.cjs$/, "");

describe("the bundle loads a feature's chunk only when the feature is used", () => {
  const dir = mkdtempSync(join(tmpdir(), "bp-bundle-load-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function loadedBy(
    options: HostileWorldOptions,
    name: string,
    admin: (world: HostileWorld) => Promise<void> = async (world) => {
      for (const path of PROBES) {
        expect((await adminGet(world, path)).statusCode, path).toBe(200);
        expect((await adminGet(world, path, "HEAD")).statusCode, `HEAD ${path}`).toBe(200);
      }
    },
  ) {
    const listFile = join(dir, `${name}.json`);
    const preload = join(dir, `${name}-preload.cjs`);
    writeFileSync(
      preload,
      `process.on("exit", () => require("node:fs").writeFileSync(${JSON.stringify(listFile)}, JSON.stringify({ files: Object.keys(require.cache), builtins: process.moduleLoadList })));\n`,
    );
    const world = await startHostileWorld({
      ...options,
      cli: BUNDLE_CLI,
      env: { ...options.env, NODE_OPTIONS: `--require=${preload}` },
    });
    try {
      const answer = await request(`${world.proxy.proxyUrl}/echo/hello`, {
        headers: options.config?.callers
          ? { "proxy-authorization": `Basic ${Buffer.from("alice:wonder").toString("base64")}` }
          : {},
      });
      await answer.body.dump();
      expect(answer.statusCode).toBe(200);
      await admin(world);
      expect(await world.proxy.stop()).toBe(0);
    } finally {
      await world.close();
    }
    const { files, builtins } = JSON.parse(readFileSync(listFile, "utf8")) as {
      files: string[];
      builtins: string[];
    };
    const bundled = files.filter((f) => f.startsWith(join(REPO_ROOT, "dist/bundle/")));
    // fastify's own code, wherever the bundler put it: its error codes are all named FST_ERR_*.
    const fastifyLoaded = bundled.some((f) => readFileSync(f, "utf8").includes("FST_ERR_"));
    return { files, builtins, chunks: bundled.map(chunkName), fastifyLoaded };
  }

  it("plain, probed and scraped: none of the on-use chunks, no node:http2, nothing from node_modules", async () => {
    const { files, builtins, chunks, fastifyLoaded } = await loadedBy({}, "plain");
    // The list is real: the start's own chunks are in it.
    expect(chunks).toEqual(expect.arrayContaining(["cli", "run", "undici-core"]));
    expect(chunks.filter((c) => ON_USE_ONLY.includes(c))).toEqual([]);
    expect(fastifyLoaded).toBe(false);
    expect(files.filter((f) => f.includes("/node_modules/"))).toEqual([]);
    expect(builtins).toContain("NativeModule _http_server");
    expect(builtins.filter((b) => /\bhttp2\b/.test(b))).toEqual([]);
    expect(builtins.filter((b) => NOT_AT_START.test(b))).toEqual([]);
  });

  it("tracing and callers on (control): their chunks are loaded", async () => {
    const usersFile = join(dir, "users.htpasswd");
    writeFileSync(usersFile, htpasswdFile({ alice: "wonder" }));
    const { chunks } = await loadedBy(
      {
        config: { callers: { basic: { usersFile } } },
        upstream: { allow: [{ user: "alice" }] },
        env: {
          OTEL_TRACES_EXPORTER: "otlp",
          // Nothing listens there: the spans are dropped, which is not what is checked here.
          OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9",
          OTEL_BSP_SCHEDULE_DELAY: "600000",
        },
      },
      "on",
    );
    expect(chunks).toEqual(expect.arrayContaining(["tracing-sdk", "authenticate"]));
  });

  it("GET /status (control): fastify's chunk is loaded, and the status answers", async () => {
    const { chunks, fastifyLoaded } = await loadedBy({}, "status", async (world) => {
      const metrics = await adminGet(world, "/metrics");
      expect(metrics.text).toContain("bearer_proxy_token_fetches_total");
      const status = await adminGet(world, "/status");
      expect(status.statusCode).toBe(200);
      expect(JSON.parse(status.text)).toMatchObject({ ready: true, upstreams: [{ name: "api" }] });
      // Once built, the same instance answers the rest; the probes still answer as before.
      expect((await adminGet(world, "/nope")).statusCode).toBe(404);
      expect((await adminGet(world, "/readyz")).statusCode).toBe(200);
    });
    expect(chunks).toContain("admin-server");
    expect(fastifyLoaded).toBe(true);
  });
});
