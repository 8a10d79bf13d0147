/**
 * ADAPTER — how the bench runs bearer-proxy and its token endpoint. Everything the bench assumes
 * about the product is in this file:
 *   - `node dist/cli.js run --config FILE` starts the proxy from a YAML config (schema:
 *     src/config/schema.ts); it keeps running until SIGTERM;
 *   - `upstreams[].http2: true` makes it speak HTTP/2 to the upstream (the `bearer-proxy-h2`
 *     competitor); the variants (lib/variants.mjs) change the config object further;
 *   - `GET http://<admin>/readyz` answers 200 once it can serve (with `token.prefetch: false`,
 *     without holding a token yet);
 *   - bench/emulator-child.mjs runs dist/emulator/emulator.js (`startEmulator`), whose
 *     `GET /_emulator/stats` returns `{tokenRequests: {total}}` and `POST /_emulator/reset-stats`
 *     zeroes it; its default client is demo-client / demo-secret.
 */
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { findFreePort } from "./competitors.mjs";
import { measuredEnv } from "./measured-env.mjs";
import { spawnPinned, stopChild, waitForLine } from "./processes.mjs";

const REPO_DIR = fileURLToPath(new URL("../..", import.meta.url));
// Overridable to bench another build (or a stand-in while developing the bench).
const CLI = process.env.BENCH_BEARER_PROXY_CLI ?? join(REPO_DIR, "dist", "cli.js");
const EMULATOR_MODULE =
  process.env.BENCH_EMULATOR_MODULE ?? join(REPO_DIR, "dist", "emulator", "emulator.js");
const START_TIMEOUT_MS = 20_000;
/**
 * Extra node flags for the proxy process (space-separated), e.g. "--max-semi-space-size=2" to
 * measure the sidecar template's memory setting, or "--cpu-prof" to profile under the bench's
 * load. Default none (the matrix runs Node's defaults; the image adds --max-semi-space-size=8).
 */
const NODE_FLAGS = (process.env.BENCH_BEARER_PROXY_NODE_FLAGS ?? "").split(" ").filter(Boolean);

/** Why bearer-proxy cannot run here, or null when its build is present. */
export function bearerProxyMissing() {
  if (!existsSync(CLI)) return `${CLI} not found (run \`npm run build\`)`;
  if (!existsSync(EMULATOR_MODULE)) return `${EMULATOR_MODULE} not found (run \`npm run build\`)`;
  return null;
}

/** The token endpoint emulator in its own process on `core`, serving the bench certificate. */
export async function startEmulatorProcess({ core, certs }) {
  const child = spawnPinned(core, process.execPath, [
    join(REPO_DIR, "bench", "emulator-child.mjs"),
    ...["--cert", certs.certFile, "--key", certs.keyFile, "--ca", certs.caFile],
    ...["--module", EMULATOR_MODULE],
  ]);
  const match = await waitForLine(child, /^EMULATOR_READY (.*)$/, START_TIMEOUT_MS);
  child.stdout.resume();
  const { port } = JSON.parse(match[1]);
  const url = `https://127.0.0.1:${port}`;
  return {
    child,
    url,
    tokenUrl: `${url}/iam/v1/oauth2/token`,
    stop: () => stopChild(child),
  };
}

/** The config bearer-proxy gets in the bench, as an object (what variants' `configure` takes). */
export function bearerProxyConfig({
  listenPort,
  adminPort,
  upstream,
  emulator,
  caFile,
  prefetch,
  http2 = false,
}) {
  return {
    listen: { host: "127.0.0.1", port: listenPort },
    admin: { host: "127.0.0.1", port: adminPort },
    log: { level: "warn" },
    // The bench stops and restarts proxies often: no drain period.
    shutdown: { drainDelay: "0s", timeout: "1s" },
    upstreams: [
      {
        name: "bench",
        baseUrl: upstream.url,
        tokenUrl: emulator.tokenUrl,
        clientId: "demo-client",
        clientSecret: "demo-secret",
        tls: { caFile },
        ...(http2 ? { http2: true } : {}),
        ...(prefetch ? {} : { token: { prefetch: false } }),
      },
    ],
  };
}

/**
 * Start bearer-proxy on `core`, wait for /readyz. `configure` turns the bench's config object
 * into a variant's. Resolves with the competitor shape plus `readyMs` (spawn → first /readyz
 * 200) and `adminUrl`.
 */
export async function startBearerProxy({
  core,
  upstream,
  emulator,
  certs,
  dir,
  control,
  prefetch = true,
  tag = "",
  http2 = false,
  configure = (config) => config,
  /** Extra environment for the proxy process (a variant's OTEL_* settings). */
  env = {},
  /** The build's cli.js (the A/A variant may run another build: BENCH_AA_CLI). */
  cli = CLI,
  /** Node flags for this process (coscheduled.mjs's --a-flags / --b-flags). */
  nodeFlags = NODE_FLAGS,
}) {
  const [listenPort, adminPort] = [await findFreePort(), await findFreePort()];
  const configFile = join(dir, `bearer-proxy${tag}.yaml`);
  await writeFile(
    configFile,
    stringify(
      configure(
        bearerProxyConfig({
          listenPort,
          adminPort,
          upstream,
          emulator,
          caFile: certs.caFile,
          prefetch,
          http2,
        }),
      ),
    ),
  );
  const spawnedAt = performance.now();
  const child = spawnPinned(
    core,
    process.execPath,
    [...nodeFlags, cli, "run", "--config", configFile],
    {
      cwd: REPO_DIR,
      env: measuredEnv(env),
    },
  );
  const spanDrops = watchSpanDrops(child);
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const isDead = () => child.exitCode !== null || child.signalCode !== null;
  try {
    await control.waitFor200(`${adminUrl}/readyz`, {
      timeoutMs: START_TIMEOUT_MS,
      isDead,
      intervalMs: 5,
    });
  } catch (error) {
    await stopChild(child);
    throw new Error(
      `bearer-proxy did not become ready: ${error.message}\n${child.stderrText.trim()}`,
    );
  }
  return {
    key: http2 ? "bearer-proxy-h2" : "bearer-proxy",
    label: http2 ? "bearer-proxy (http2)" : "bearer-proxy",
    baseUrl: `http://127.0.0.1:${listenPort}`,
    adminUrl,
    injects: true,
    child,
    readyMs: performance.now() - spawnedAt,
    pids: () => [child.pid],
    isDead,
    stop: () => stopChild(child),
    /** Spans the proxy logged as dropped so far (tracing on; see `watchSpanDrops`). */
    spanDrops: () => ({ ...spanDrops }),
  };
}

/**
 * Reads the proxy's log (stdout, JSON lines at `warn` and above: quiet unless something is
 * wrong) for the tracing provider's drop reports (src/observability/tracing-provider.ts) and
 * sums their `droppedSpans`: `queueFull` (the batch processor's queue was full: the collector
 * took spans slower than they were made) and `exportFailed` (the collector did not answer 2xx).
 * A lower bound: the proxy reports at most once a minute, when the queue moves again.
 */
function watchSpanDrops(child) {
  const drops = { queueFull: 0, exportFailed: 0 };
  let buffered = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk) => {
    const lines = (buffered + chunk).split("\n");
    buffered = lines.pop() ?? "";
    for (const line of lines) {
      if (!line.includes("spans dropped")) continue;
      let record;
      try {
        record = JSON.parse(line);
      } catch {
        continue;
      }
      const dropped = Number(record.droppedSpans) || 0;
      if (/^span export queue full/.test(record.msg)) drops.queueFull += dropped;
      else if (/^span export failed/.test(record.msg)) drops.exportFailed += dropped;
    }
  });
  return drops;
}
