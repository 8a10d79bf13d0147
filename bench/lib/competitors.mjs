/**
 * Start the competitors, each as its own process on the proxy core. Every competitor is described by the same shape:
 * `{key, label, baseUrl, injects, pids(), stop()}` where `baseUrl` is what the load generator hits.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort as findFreePort } from "./free-port.mjs";
import { measuredEnv } from "./measured-env.mjs";
import { writeNginxConfig } from "./nginx.mjs";
import { childPids, spawnPinned, stopChild, waitForLine } from "./processes.mjs";

const BENCH_DIR = fileURLToPath(new URL("..", import.meta.url));
const START_TIMEOUT_MS = 20_000;

/** Extra node flags for the Node baselines (bench/gc-promotion.mjs adds `--trace-gc-nvp`). */
const BASELINE_NODE_FLAGS = (process.env.BENCH_BASELINE_NODE_FLAGS ?? "")
  .split(" ")
  .filter(Boolean);

const base64url = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");

/**
 * The static token the header-injecting baselines send, shaped like the one bearer-proxy fetches
 * and injects: the emulator's HS256 JWT for the bench's client at the default version and scope,
 * so both request heads are as long (292 bytes of token; test/bench/static-token.test.ts). The
 * 35-byte stand-in it replaces saved the forwarder 0.4 µs a request (28.0 → 28.4 µs, Node 24,
 * 10 rounds each): bearer-proxy read 0.87× of it, and 0.89× against equal tokens (issue 33,
 * bench/PROFILE.md "A quiet machine").
 */
export const STATIC_TOKEN = [
  base64url({ alg: "HS256", typ: "JWT" }),
  base64url({
    iat: 1_795_875_053,
    exp: 1_795_875_653,
    jti: "1eb2a641-1d42-467d-ad73-2b1cb4bc77b6",
    client_id: "demo-client",
    ver: "2022-01-01",
    scope: "files:read files:write",
  }),
  Buffer.alloc(32, 7).toString("base64url"),
].join(".");

/** A free port for a child to bind (bench/lib/free-port.mjs: never one `listen(0)` could hand out). */
export { findFreePort };

/** Start a node script that prints `<TAG> {"port":N}` when ready. */
async function startNodeScript(core, script, args, tag, env = {}) {
  const child = spawnPinned(
    core,
    process.execPath,
    [...BASELINE_NODE_FLAGS, join(BENCH_DIR, script), ...args],
    { env: measuredEnv(env) },
  );
  const match = await waitForLine(child, new RegExp(`^${tag} (.*)$`), START_TIMEOUT_MS);
  child.stdout.resume();
  child.stderr.resume();
  return { child, port: JSON.parse(match[1]).port };
}

function describe(key, label, baseUrl, child, injects, extraPids = () => []) {
  return {
    key,
    label,
    baseUrl,
    injects,
    child,
    pids: () => [child.pid, ...extraPids()],
    isDead: () => child.exitCode !== null || child.signalCode !== null,
    stop: () => stopChild(child),
  };
}

/** (e) No proxy: the load generator talks TLS to the upstream itself. */
export function describeDirect(upstream) {
  return { ...describe("direct", "direct (ceiling)", upstream.url, upstream.child, false) };
}

/** A Node baseline in bench/baselines/ (their shared command line: lib/baseline-cli.mjs). */
function nodeBaseline(defaultKey, defaultLabel, script, readyTag) {
  return async ({
    core,
    upstream,
    certs,
    args = [],
    env,
    key = defaultKey,
    label = defaultLabel,
  }) => {
    const { child, port } = await startNodeScript(
      core,
      `baselines/${script}`,
      ["--upstream", upstream.url, "--ca", certs.caFile, "--token", STATIC_TOKEN, ...args],
      readyTag,
      env,
    );
    return describe(key, label, `http://127.0.0.1:${port}`, child, true);
  };
}

/**
 * (c) The minimal undici forwarder. With `args: ["--feature", name]` it also runs one
 * bearer-proxy feature's code per request (lib/variants.mjs `inPlace`).
 */
export const startUndiciForwarder = nodeBaseline(
  "undici",
  "undici forwarder",
  "undici-forwarder.mjs",
  "FORWARDER_READY",
);

/** (d) fastify + @fastify/http-proxy. */
export const startFastifyProxy = nodeBaseline(
  "fastify",
  "fastify-http-proxy",
  "fastify-http-proxy.mjs",
  "FASTIFY_READY",
);

/** (b) nginx, master + one worker; CPU and RSS are summed over both. */
export async function startNginx({ core, upstream, certs, nginxPath, dir, control }) {
  const listenPort = await findFreePort();
  const confFile = await writeNginxConfig({
    dir,
    listenPort,
    upstreamPort: upstream.port,
    caFile: certs.caFile,
    token: STATIC_TOKEN,
  });
  const child = spawnPinned(core, nginxPath, ["-p", dir, "-c", confFile]);
  child.stdout.resume();
  const competitor = describe("nginx", "nginx", `http://127.0.0.1:${listenPort}`, child, true, () =>
    childPids(child.pid),
  );
  await control.waitFor200(`${competitor.baseUrl}/small`, {
    timeoutMs: START_TIMEOUT_MS,
    isDead: competitor.isDead,
  });
  return competitor;
}
