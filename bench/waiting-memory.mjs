/**
 * Memory per waiting request (issue 30 item 3): what one request parked for a pacing turn costs
 * the proxy process, the figure behind `limits.maxWaiting`'s default and docs/benchmark.md, "Waiting requests".
 *
 * A real bearer-proxy process (`node dist/cli.js run`) in front of the bench's Node upstream,
 * with one route allowing one request per 30 minutes per caller and waits of days: after each
 * source address's first request (127.0.1.x), every request parks. Real clients (node:http, one
 * connection per request, as a legacy tool) park 0, then `--steps` requests in total; at each
 * step the bench waits until /status counts them waiting, lets the process settle, and reads its
 * RSS (VmRSS) and V8's used heap (`nodejs_heap_size_used_bytes` from /metrics), median of
 * several samples. The figure is the least-squares slope over the steps: bytes per waiting
 * request, with its client connection (the socket, parser, request and response objects) — what
 * a parked request really holds. Then every client hangs up and the bench reads what is left.
 *
 *   node bench/waiting-memory.mjs [--steps 1000,2000,4000,8000] [--node-flags="--max-semi-space-size=8"]
 *
 * Needs `npm run build`. Opens up to the last step's count of sockets (plus as many in the
 * proxy): check `ulimit -n`.
 */
import { setMaxListeners } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { stringify } from "yaml";
import { startEmulatorProcess } from "./lib/bearer-proxy.mjs";
import { createBenchCertificates } from "./lib/certs.mjs";
import { findFreePort } from "./lib/competitors.mjs";
import { createControlClient } from "./lib/control-client.mjs";
import { readRssBytes, spawnPinned, stopAllChildren, stopChild } from "./lib/processes.mjs";
import { median } from "./lib/summarize.mjs";
import { startNodeUpstream } from "./lib/upstreams.mjs";

const REPO_DIR = fileURLToPath(new URL("..", import.meta.url));
const CLI = join(REPO_DIR, "dist", "cli.js");
const MIB = 1024 * 1024;
/** Requests one address parks at most (the per-key queue holds 1,000). */
const PER_ADDRESS = 500;

const { values: options } = parseArgs({
  options: {
    steps: { type: "string", default: "1000,2000,4000,8000" },
    "node-flags": { type: "string", default: "" },
    samples: { type: "string", default: "5" },
  },
});
const steps = options.steps.split(",").map(Number);
const nodeFlags = options["node-flags"].split(" ").filter(Boolean);
const sampleCount = Number(options.samples);
const log = (line) => process.stderr.write(`waiting-memory: ${line}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** One GET on a fresh connection from `localAddress`; resolves with the status (0: hung up). */
function get(url, localAddress, signal) {
  return new Promise((resolve) => {
    const req = httpRequest(url, { agent: false, localAddress, signal }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode));
    });
    req.on("error", () => resolve(0));
    req.end();
  });
}

const dir = await mkdtemp(join(tmpdir(), "bp-waiting-memory-"));
try {
  const certs = await createBenchCertificates(dir);
  const control = createControlClient(certs.caPem);
  const emulator = await startEmulatorProcess({ core: null, certs });
  const upstream = await startNodeUpstream({ core: null, certs, control });
  const [listenPort, adminPort] = [await findFreePort(), await findFreePort()];
  const lastStep = Math.max(...steps);
  const configFile = join(dir, "config.yaml");
  await writeFile(
    configFile,
    stringify({
      listen: { host: "127.0.0.1", port: listenPort },
      admin: { host: "127.0.0.1", port: adminPort },
      log: { level: "warn" },
      shutdown: { drainDelay: "0s", timeout: "1s" },
      limits: {
        maxConnections: lastStep + 1_000,
        maxWaiting: lastStep + 1_000,
        maxWaitingPerCaller: PER_ADDRESS,
      },
      upstreams: [
        {
          name: "parked",
          baseUrl: upstream.url,
          tokenUrl: emulator.tokenUrl,
          clientId: "demo-client",
          clientSecret: "demo-secret",
          tls: { caFile: certs.caFile },
          rateLimit: { requests: 1, per: "30m", by: "caller", wait: "500h" },
        },
      ],
    }),
  );
  const proxy = spawnPinned(null, process.execPath, [
    ...nodeFlags,
    CLI,
    "run",
    "--config",
    configFile,
  ]);
  const proxyUrl = `http://127.0.0.1:${listenPort}`;
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  await control.waitFor200(`${adminUrl}/readyz`, { timeoutMs: 20_000 });

  const addresses = Array.from(
    { length: Math.ceil(lastStep / PER_ADDRESS) },
    (_, i) => `127.0.1.${i + 1}`,
  );
  // Each address spends its one turn; a few hundred requests warm the code paths.
  for (const address of addresses) {
    const status = await get(`${proxyUrl}/small`, address);
    if (status !== 200) throw new Error(`warm-up from ${address} answered ${status}`);
  }

  const waiting = async () =>
    JSON.parse((await control.send("GET", `${adminUrl}/status?limit=1`)).text).waiting.requests;
  const heapUsed = async () => {
    const text = (await control.send("GET", `${adminUrl}/metrics`)).text;
    return Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? Number.NaN);
  };
  async function measure() {
    await sleep(2_000);
    const rss = [];
    const heap = [];
    for (let i = 0; i < sampleCount; i++) {
      rss.push(readRssBytes([proxy.pid]));
      heap.push(await heapUsed());
      await sleep(300);
    }
    return { rss: median(rss), heap: median(heap) };
  }

  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  const points = [{ parked: 0, ...(await measure()) }];
  log(
    `0 parked: RSS ${(points[0].rss / MIB).toFixed(1)} MiB, heap ${(points[0].heap / MIB).toFixed(1)} MiB`,
  );
  const pending = [];
  let parked = 0;
  for (const target of steps) {
    for (; parked < target; parked++) {
      const address = addresses[Math.floor(parked / PER_ADDRESS)];
      pending.push(get(`${proxyUrl}/small`, address, controller.signal));
    }
    const deadline = Date.now() + 60_000;
    while ((await waiting()) < target) {
      if (Date.now() > deadline) throw new Error(`${target} requests never all parked`);
      await sleep(100);
    }
    const point = { parked: target, ...(await measure()) };
    points.push(point);
    log(
      `${target} parked: RSS ${(point.rss / MIB).toFixed(1)} MiB, heap ${(point.heap / MIB).toFixed(1)} MiB`,
    );
  }

  controller.abort();
  await Promise.all(pending);
  while ((await waiting()) > 0) await sleep(100);
  const after = await measure();

  const slope = (key) => {
    const n = points.length;
    const mx = points.reduce((s, p) => s + p.parked, 0) / n;
    const my = points.reduce((s, p) => s + p[key], 0) / n;
    let num = 0;
    let den = 0;
    for (const p of points) {
      num += (p.parked - mx) * (p[key] - my);
      den += (p.parked - mx) ** 2;
    }
    return num / den;
  };
  const kib = (bytes) => (bytes / 1024).toFixed(1);
  const lines = [
    `node ${process.version}${nodeFlags.length ? ` ${nodeFlags.join(" ")}` : ""}`,
    "| parked | RSS MiB | heap used MiB |",
    "|---:|---:|---:|",
    ...points.map(
      (p) => `| ${p.parked} | ${(p.rss / MIB).toFixed(1)} | ${(p.heap / MIB).toFixed(1)} |`,
    ),
    `| after all hung up | ${(after.rss / MIB).toFixed(1)} | ${(after.heap / MIB).toFixed(1)} |`,
    "",
    `per waiting request (least-squares slope): RSS ${kib(slope("rss"))} KiB, heap ${kib(slope("heap"))} KiB`,
  ];
  process.stdout.write(`${lines.join("\n")}\n`);
  await stopChild(proxy);
  await control.close();
} finally {
  await stopAllChildren();
  await rm(dir, { recursive: true, force: true });
}
