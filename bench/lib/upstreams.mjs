/**
 * The bench's HTTPS upstream, on the load core, in one of two forms with the same routes and
 * the same interface `{kind, url, port, child, stats(), reset(), stop()}`:
 *   - `nginx` (default when nginx is installed): fast enough not to cap the proxies it serves —
 *     a Node upstream sharing its core with the load generator tops out near the Node proxies'
 *     own throughput and would hide the difference to nginx-as-proxy;
 *   - `node` (bench/upstream.mjs): needs nothing installed.
 * Both count requests with and without `Authorization: Bearer …`, or `DPoP …` with a `DPoP`
 * proof (nginx through a one-byte access log line per request), and check no credentials;
 * `bearer` counts both: the injected ones.
 */
import { chmod, mkdir, readFile, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { findFreePort } from "./competitors.mjs";
import { renderNginxUpstreamConfig } from "./nginx.mjs";
import { spawnPinned, stopChild, waitForLine } from "./processes.mjs";

const BENCH_DIR = fileURLToPath(new URL("..", import.meta.url));
const START_TIMEOUT_MS = 20_000;
/** nginx flushes its access log buffer at most this often (`flush=` in the config). */
const LOG_FLUSH_MS = 100;

/** bench/upstream.mjs (node:https). */
export async function startNodeUpstream({ core, certs, control }) {
  const child = spawnPinned(core, process.execPath, [
    join(BENCH_DIR, "upstream.mjs"),
    ...["--cert", certs.certFile, "--key", certs.keyFile],
  ]);
  const match = await waitForLine(child, /^UPSTREAM_READY (.*)$/, START_TIMEOUT_MS);
  child.stdout.resume();
  const { port } = JSON.parse(match[1]);
  const url = `https://127.0.0.1:${port}`;
  return {
    kind: "node",
    child,
    port,
    url,
    stats: () => control.getJson(`${url}/_bench/stats`),
    reset: () => control.postJson(`${url}/_bench/reset`),
    stop: () => stopChild(child),
  };
}

/** nginx serving the same routes over TLS; `port` is chosen by the caller. */
export async function startNginxUpstream({ core, certs, control, nginxPath, dir, port }) {
  const wwwDir = join(dir, "www");
  const authLog = join(dir, "auth.log");
  const connLog = join(dir, "conn.log");
  await mkdir(wwwDir, { recursive: true });
  await chmod(dir, 0o755);
  await chmod(wwwDir, 0o755);
  await writeFile(join(wwwDir, "1m"), Buffer.alloc(1024 * 1024, "b"), { mode: 0o644 });
  // POST to a static file is 405, which the config turns into the /read answer.
  await writeFile(join(wwwDir, "read"), "{}\n", { mode: 0o644 });
  const confFile = join(dir, "nginx.conf");
  await writeFile(
    confFile,
    renderNginxUpstreamConfig({
      dir,
      wwwDir,
      authLog,
      connLog,
      port,
      certFile: certs.certFile,
      keyFile: certs.keyFile,
    }),
  );
  const child = spawnPinned(core, nginxPath, ["-p", dir, "-c", confFile]);
  child.stdout.resume();
  const url = `https://127.0.0.1:${port}`;
  await control.waitFor200(`${url}/small`, {
    timeoutMs: START_TIMEOUT_MS,
    isDead: () => child.exitCode !== null || child.signalCode !== null,
  });

  /** Counts so far; `settle` first waits for the worker to flush its buffered log lines. */
  async function stats({ settle = true } = {}) {
    if (settle) await new Promise((resolve) => setTimeout(resolve, LOG_FLUSH_MS * 2.5));
    const text = await readFile(authLog, "latin1").catch(() => "");
    let bearer = 0;
    let plain = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 66) bearer++;
      else if (c === 80) plain++;
    }
    // nginx numbers connections in order: a serial above the highest one seen before this
    // cell is a connection opened (a full TLS handshake) during it.
    const connText = await readFile(connLog, "latin1").catch(() => "");
    const serials = new Set(connText.slice(connLogOffset).split("\n").filter(Boolean).map(Number));
    let handshakes = 0;
    for (const serial of serials) if (serial > maxSerialBefore) handshakes++;
    return { total: bearer + plain, bearer, plain, connections: serials.size, handshakes };
  }
  let connLogOffset = 0;
  let maxSerialBefore = 0;
  /** Marks where this cell's connection log starts and the highest serial before it. */
  async function markConnections() {
    const connText = await readFile(connLog, "latin1").catch(() => "");
    for (const line of connText.slice(connLogOffset).split("\n")) {
      if (line) maxSerialBefore = Math.max(maxSerialBefore, Number(line));
    }
    connLogOffset = connText.length;
  }

  return {
    kind: "nginx",
    child,
    port,
    url,
    stats,
    // nginx opens its logs with O_APPEND, so truncating in place is a clean reset.
    reset: () => Promise.all([truncate(authLog, 0).catch(() => {}), markConnections()]),
    stop: () => stopChild(child),
  };
}

/**
 * The bench's HTTPS upstream, on the load core: nginx when `nginxPath` is given (its files under
 * `dir`/upstream), else the Node one.
 */
export async function startUpstream({ core, certs, control, nginxPath, dir }) {
  if (!nginxPath) return startNodeUpstream({ core, certs, control });
  return startNginxUpstream({
    core,
    certs,
    control,
    nginxPath,
    dir: join(dir, "upstream"),
    port: await findFreePort(),
  });
}
