/**
 * Token-side measurements of bearer-proxy: a cold burst (N requests at once to a proxy that has
 * no token yet → how many token requests reached the emulator, and the burst's latency) and
 * start-to-ready time (spawn → first /readyz 200).
 */
import { connect } from "node:net";
import { startBearerProxy } from "./bearer-proxy.mjs";

const BURST_TIMEOUT_MS = 30_000;
const CONNECT_BATCH = 100;

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** Open `count` TCP connections to `port`, a batch at a time so the accept backlog never overflows. */
async function openSockets(port, count) {
  const sockets = [];
  for (let i = 0; i < count; i += CONNECT_BATCH) {
    const batch = Array.from({ length: Math.min(CONNECT_BATCH, count - i) }, () => {
      const socket = connect({ host: "127.0.0.1", port, noDelay: true });
      sockets.push(socket);
      return new Promise((resolve, reject) => {
        socket.once("connect", resolve);
        socket.once("error", reject);
      });
    });
    await Promise.all(batch);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return sockets;
}

/** Send one `GET path` on every socket at the same moment; resolve with per-request results. */
function fireAll(sockets, port, path) {
  const request = Buffer.from(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`,
  );
  const results = sockets.map(
    (socket) =>
      new Promise((resolve) => {
        let head = "";
        let started = 0n;
        const timer = setTimeout(
          () => socket.destroy(new Error("burst timeout")),
          BURST_TIMEOUT_MS,
        );
        socket.setEncoding("latin1");
        socket.on("data", (chunk) => {
          if (head.length < 64) head += chunk;
        });
        socket.once("close", () => {
          clearTimeout(timer);
          const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
          resolve({ status, ms: Number(process.hrtime.bigint() - started) / 1e6 });
        });
        socket.on("error", () => {});
        socket.start = () => {
          started = process.hrtime.bigint();
        };
      }),
  );
  // All writes in one synchronous loop: the requests land together.
  for (const socket of sockets) {
    socket.start();
    socket.write(request);
  }
  return Promise.all(results);
}

/**
 * 1,000 (or `concurrency`) concurrent requests to a freshly started bearer-proxy configured with
 * `token.prefetch: false`; `world` is what `startBearerProxy` takes (core, upstream, emulator,
 * certs, dir, control). Resolves `{concurrency, tokenRequests, statuses, p50Ms, p99Ms, maxMs}`.
 */
export async function measureColdBurst({ concurrency, ...world }) {
  const { upstream, emulator, control } = world;
  const proxy = await startBearerProxy({ ...world, prefetch: false, tag: "-cold" });
  try {
    await control.postJson(`${emulator.url}/_emulator/reset-stats`);
    await upstream.reset();
    const port = Number(new URL(proxy.baseUrl).port);
    const sockets = await openSockets(port, concurrency);
    const results = await fireAll(sockets, port, "/small");
    const stats = await control.getJson(`${emulator.url}/_emulator/stats`);
    const seen = await upstream.stats();
    const statuses = {};
    for (const { status } of results) statuses[status] = (statuses[status] ?? 0) + 1;
    const sorted = results.map((r) => r.ms).sort((a, b) => a - b);
    return {
      concurrency,
      tokenRequests: stats.tokenRequests.total,
      statuses,
      upstreamBearer: seen.bearer,
      upstreamPlain: seen.plain,
      p50Ms: percentile(sorted, 50),
      p99Ms: percentile(sorted, 99),
      maxMs: sorted.at(-1) ?? null,
    };
  } finally {
    await proxy.stop();
  }
}

/**
 * Start bearer-proxy (default config, token prefetched) `samples` times; spawn → /readyz 200.
 * `world` as for `measureColdBurst`.
 */
export async function measureStartToReady({ samples, ...world }) {
  const readyMs = [];
  for (let i = 0; i < samples; i++) {
    const proxy = await startBearerProxy({ ...world, tag: `-ready${i}` });
    readyMs.push(proxy.readyMs);
    await proxy.stop();
  }
  return { samples: readyMs };
}
