/**
 * `npm run soak` (= `node scripts/soak.mjs`): the long-run test of issue 9 against the BUILT code
 * (run `npm run build` first). The proxy runs as its own process (`node dist/cli.js run`), the
 * emulator (dist/emulator) issues 3-second tokens through a recording tap, and a paced load loop
 * (undici Pool, bounded concurrency) sends constant traffic. Along the way the credentials rotate
 * once (a Kubernetes-style secret volume: new files swapped in atomically while the IdP accepts
 * old and new, then only new) and the token endpoint answers 503 for a while.
 *
 * Pass (exit 0) when: no request failed while a valid token existed; successful token requests
 * are within ±40% of duration / (0.8 × 3 s); the proxy's RSS slope over the second half is under
 * --max-rss-slope (default 1024 KiB/min, i.e. < 1.5 GiB/day; enforced only for runs of 120 s or
 * more, where GC sawtooth no longer dominates a least-squares fit). Exit 1 otherwise, 2 on bad
 * options. Writes a Markdown summary to stdout and to bench/results/soak-<date>.md.
 *
 *   node scripts/soak.mjs                   # ~3 minutes, 10 s outage
 *   node scripts/soak.mjs --short           # ~40 s (CI), 4 s outage
 *   node scripts/soak.mjs --duration 10m --rate 400 --concurrency 16
 */
import { spawn } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Agent, Pool, request } from "undici";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const EXPIRES_IN_S = 3;
const OLD = { clientId: "soak-old", clientSecret: "old-soak-secret+&=%" };
const NEW = { clientId: "soak-new", clientSecret: "new-soak-secret ✓/?" };
const log = (line) => process.stderr.write(`soak: ${line}\n`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function parseDuration(text) {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(String(text));
  if (!match) throw new Error(`bad duration ${text} (use e.g. 180s, 3m, 500ms)`);
  return Number(match[1]) * { ms: 1, s: 1000, m: 60_000 }[match[2] ?? "s"];
}

function parseOptions() {
  const { values } = parseArgs({
    options: {
      duration: { type: "string" },
      short: { type: "boolean", default: false },
      rate: { type: "string", default: "200" },
      concurrency: { type: "string", default: "8" },
      "max-rss-slope": { type: "string", default: "1024" },
      out: { type: "string", default: join(ROOT, "bench", "results") },
    },
  });
  const durationMs = parseDuration(values.duration ?? (values.short ? "40s" : "180s"));
  return {
    durationMs,
    short: values.short,
    rate: Number(values.rate),
    concurrency: Number(values.concurrency),
    maxRssSlopeKiBPerMin: Number(values["max-rss-slope"]),
    outDir: values.out,
    outageMs: values.short ? 4_000 : 10_000,
    rotateAtMs: durationMs * 0.25,
    dropOldAtMs: durationMs * 0.25 + Math.max(8_000, durationMs * 0.1),
    outageAtMs: durationMs * 0.5,
  };
}

/** A recording pass-through to the emulator's token endpoint; see test/hardening/support/token-tap.ts. */
async function startTap(targetUrl, caPem, cert) {
  const agent = new Agent({ connect: { ca: caPem } });
  const exchanges = [];
  const server = createServer({ cert: cert.certPem, key: cert.keyPem }, async (req, res) => {
    const exchange = {
      receivedAtMs: Date.now(),
      answeredAtMs: undefined,
      clientId: undefined,
      status: undefined,
      expiresIn: undefined,
      token: false,
    };
    exchanges.push(exchange);
    try {
      const chunks = [];
      for await (const chunk of req) chunks.push(chunk);
      const body = Buffer.concat(chunks).toString("utf8");
      exchange.clientId = new URLSearchParams(body).get("client_id") ?? undefined;
      const headers = {};
      for (const name of ["content-type", "accept", "x-version", "authorization"])
        if (req.headers[name]) headers[name] = req.headers[name];
      const answer = await request(`${targetUrl}${req.url}`, {
        method: "POST",
        headers,
        body,
        dispatcher: agent,
      });
      const text = await answer.body.text();
      if (answer.statusCode === 200) {
        const json = JSON.parse(text);
        exchange.token = typeof json.access_token === "string";
        exchange.expiresIn = json.expires_in;
      }
      const out = { "content-length": Buffer.byteLength(text) };
      for (const name of ["content-type", "retry-after", "www-authenticate"])
        if (answer.headers[name]) out[name] = answer.headers[name];
      res.writeHead(answer.statusCode, out).end(text);
      exchange.status = answer.statusCode;
      exchange.answeredAtMs = Date.now();
    } catch {
      res.destroy();
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `https://127.0.0.1:${server.address().port}`;
  return {
    url,
    exchanges,
    close: () => new Promise((resolve) => server.close(resolve)).then(() => agent.close()),
  };
}

/** A secret volume laid out like Kubernetes mounts one: files symlink into `..data`, swapped atomically. */
function writeCredentials(dir, version, client) {
  const target = `..v${version}`;
  mkdirSync(join(dir, target));
  writeFileSync(join(dir, target, "client-id"), client.clientId);
  writeFileSync(join(dir, target, "client-secret"), `${client.clientSecret}\n`);
  symlinkSync(target, join(dir, "..data_tmp"));
  renameSync(join(dir, "..data_tmp"), join(dir, "..data"));
}

/** Spawn the built CLI; resolves once it announced its ports. Counts warn/error lines by message. */
function startProxy(configFile, logFile) {
  const child = spawn(
    process.execPath,
    [join(ROOT, "dist", "cli.js"), "run", "--config", configFile],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const problems = new Map();
  const lines = [];
  let tokenFetched = 0;
  const ready = new Promise((resolve, reject) => {
    child.once("exit", (code) =>
      reject(new Error(`proxy exited early with ${code}; see ${logFile}`)),
    );
    createInterface({ input: child.stdout }).on("line", (line) => {
      if (line.includes('"msg":"request"')) return;
      lines.push(line);
      if (line.includes('"msg":"token fetched"')) tokenFetched++;
      if (
        line.includes('"level":"warn"') ||
        line.includes('"level":"error"') ||
        line.includes('"level":"fatal"')
      ) {
        const { level, msg } = JSON.parse(line);
        problems.set(`${level}: ${msg}`, (problems.get(`${level}: ${msg}`) ?? 0) + 1);
      }
      if (line.includes("proxyPorts")) {
        const { proxyPorts, adminPort } = JSON.parse(line);
        resolve({ proxyPort: proxyPorts[0], adminPort });
      }
    });
    createInterface({ input: child.stderr }).on("line", (line) => lines.push(`stderr: ${line}`));
  });
  const stop = async () => {
    if (child.exitCode !== null) return child.exitCode;
    const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    const code = await exited;
    clearTimeout(timer);
    writeFileSync(logFile, `${lines.join("\n")}\n`);
    return code;
  };
  return { child, ready, stop, problems, tokenFetched: () => tokenFetched };
}

/** VmRSS of `pid` in KiB, sampled every second. */
function sampleRss(pid, startMs) {
  const samples = [];
  const read = () => {
    try {
      const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
      if (match) samples.push({ tMs: Date.now() - startMs, kib: Number(match[1]) });
    } catch {
      // The process is gone: nothing to sample.
    }
  };
  read();
  const timer = setInterval(read, 1_000);
  return { samples, stop: () => clearInterval(timer) };
}

/** Least-squares slope in KiB per minute. */
function slopeKiBPerMin(samples) {
  const n = samples.length;
  if (n < 2) return 0;
  const mx = samples.reduce((s, p) => s + p.tMs, 0) / n;
  const my = samples.reduce((s, p) => s + p.kib, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of samples) {
    num += (p.tMs - mx) * (p.kib - my);
    den += (p.tMs - mx) ** 2;
  }
  return den === 0 ? 0 : (num / den) * 60_000;
}

/** Paced constant load: `concurrency` workers, `rate` requests per second in total. */
async function runLoad(pool, { durationMs, rate, concurrency }) {
  const result = { ok: 0, failures: [], latenciesMs: [] };
  const endAtMs = Date.now() + durationMs;
  const intervalMs = (concurrency / rate) * 1000;
  const paths = ["/platform/v1/spreadsheets/demo", "/echo/soak"];
  const worker = async (w) => {
    let next = Date.now() + (w * intervalMs) / concurrency;
    for (let i = w; Date.now() < endAtMs; i++) {
      await sleep(Math.max(0, next - Date.now()));
      next += intervalMs;
      const startMs = Date.now();
      let status = 0;
      let code;
      try {
        const response = await pool.request({ path: paths[i % paths.length], method: "GET" });
        await response.body.dump();
        status = response.statusCode;
        code = response.headers["bearer-proxy-error"];
      } catch (error) {
        code = `transport:${error.code ?? "error"}`;
      }
      const endMs = Date.now();
      result.latenciesMs.push(endMs - startMs);
      if (status === 200) result.ok++;
      else result.failures.push({ startMs, endMs, status, code: code ?? `status ${status}` });
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  return result;
}

function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0
    ? 0
    : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function summarize(options, load, exchanges, rss, proxy, startMs) {
  const windows = exchanges
    .filter((e) => e.token && e.answeredAtMs !== undefined)
    .map((e) => [e.answeredAtMs + 100, e.receivedAtMs + Number(e.expiresIn) * 900 - 100]);
  const whileValid = load.failures.filter((f) =>
    windows.some(([from, to]) => f.startMs >= from && f.startMs <= to),
  );
  const byCode = new Map();
  for (const f of load.failures) byCode.set(f.code, (byCode.get(f.code) ?? 0) + 1);
  const tokens = exchanges.filter((e) => e.status === 200).length;
  const failedAttempts = exchanges.length - tokens;
  const expected = options.durationMs / (0.8 * EXPIRES_IN_S * 1000);
  const secondHalf = rss.filter((s) => s.tMs >= options.durationMs / 2);
  const slope = slopeKiBPerMin(secondHalf);
  const kib = rss.map((s) => s.kib);
  const enforceRss = options.durationMs >= 120_000;
  const lateOld = exchanges.filter(
    (e) => e.clientId === OLD.clientId && e.receivedAtMs - startMs > options.dropOldAtMs,
  );
  const checks = [
    [
      "no failed request while a valid token existed",
      whileValid.length === 0,
      `${whileValid.length} such failures`,
    ],
    [
      "token requests within ±40% of expected",
      Math.abs(tokens - expected) <= expected * 0.4,
      `${tokens} vs ${expected.toFixed(1)}`,
    ],
    [
      `RSS slope under ${options.maxRssSlopeKiBPerMin} KiB/min (second half)`,
      !enforceRss || slope < options.maxRssSlopeKiBPerMin,
      `${slope.toFixed(0)} KiB/min${enforceRss ? "" : " (reported only: run < 120 s)"}`,
    ],
    [
      "old credentials unused after the IdP dropped them",
      lateOld.length === 0,
      `${lateOld.length} late requests`,
    ],
  ];
  const total = load.ok + load.failures.length;
  const s = (ms) => `${(ms / 1000).toFixed(0)} s`;
  const md = [
    `# Soak ${new Date(startMs).toISOString()}${options.short ? " (short)" : ""}`,
    "",
    `Built proxy (\`node dist/cli.js run\`), Node ${process.version}. ${s(options.durationMs)} at ${options.rate} req/s target, ` +
      `${options.concurrency} workers; tokens expire_in ${EXPIRES_IN_S} s; rotation at ${s(options.rotateAtMs)} ` +
      `(old client dropped at ${s(options.dropOldAtMs)}); token endpoint 503 from ${s(options.outageAtMs)} for ${s(options.outageMs)}.`,
    "",
    "| figure | value |",
    "|---|---|",
    `| requests | ${total} (${(total / (options.durationMs / 1000)).toFixed(0)} req/s) |`,
    `| ok / failed | ${load.ok} / ${load.failures.length} |`,
    `| failures by code | ${[...byCode].map(([c, n]) => `${c}: ${n}`).join(", ") || "none"} |`,
    `| failures while a valid token existed | ${whileValid.length} |`,
    `| latency p50 / p99 / max | ${percentile(load.latenciesMs, 50)} / ${percentile(load.latenciesMs, 99)} / ${Math.max(0, ...load.latenciesMs)} ms |`,
    `| token requests ok (expected ≈ duration / 2.4 s) | ${tokens} (expected ${expected.toFixed(1)}; proxy logged ${proxy.tokenFetched()}) |`,
    `| failed token attempts (outage, rotation) | ${failedAttempts} |`,
    `| proxy RSS min / max / last | ${Math.min(...kib)} / ${Math.max(...kib)} / ${kib.at(-1)} KiB |`,
    `| RSS slope, second half (least squares) | ${slope.toFixed(0)} KiB/min over ${secondHalf.length} samples |`,
    `| proxy warn/error log lines | ${[...proxy.problems].map(([m, n]) => `${n}× ${m}`).join("; ") || "none"} |`,
    "",
    "| check | result | detail |",
    "|---|---|---|",
    ...checks.map(([name, ok, detail]) => `| ${name} | ${ok ? "PASS" : "FAIL"} | ${detail} |`),
    "",
  ].join("\n");
  return { md, passed: checks.every(([, ok]) => ok) };
}

async function main() {
  let options;
  try {
    options = parseOptions();
  } catch (error) {
    log(error.message);
    return 2;
  }
  const { generateCertificates } = await import(join(ROOT, "dist", "emulator", "certificates.js"));
  const { startEmulator } = await import(join(ROOT, "dist", "emulator", "emulator.js"));
  const dir = mkdtempSync(join(tmpdir(), "bearer-proxy-soak-"));
  const certs = await generateCertificates();
  const emulator = await startEmulator({
    host: "127.0.0.1",
    port: 0,
    tls: certs,
    clients: [OLD],
    tokenLifetimeSeconds: EXPIRES_IN_S + 1,
  });
  const tap = await startTap(emulator.url, certs.caPem, certs);
  const volume = join(dir, "secret");
  mkdirSync(volume);
  writeCredentials(volume, 1, OLD);
  symlinkSync("..data/client-id", join(volume, "client-id"));
  symlinkSync("..data/client-secret", join(volume, "client-secret"));
  writeFileSync(join(dir, "ca.pem"), certs.caPem);
  const configFile = join(dir, "soak.yaml");
  writeFileSync(
    configFile,
    [
      "listen: { host: 127.0.0.1, port: 0 }",
      "admin: { host: 127.0.0.1, port: 0 }",
      "log: { level: info, format: json }",
      'shutdown: { drainDelay: "0s", timeout: "5s" }',
      "upstreams:",
      "  - name: api",
      `    baseUrl: ${emulator.url}`,
      `    tokenUrl: ${tap.url}/iam/v1/oauth2/token`,
      `    clientIdFile: ${join(volume, "client-id")}`,
      `    clientSecretFile: ${join(volume, "client-secret")}`,
      `    tls: { caFile: ${join(dir, "ca.pem")} }`,
      "",
    ].join("\n"),
  );
  const logFile = join(tmpdir(), `bearer-proxy-soak-${Date.now()}.log`);
  const proxy = startProxy(configFile, logFile);
  let exitCode = 1;
  try {
    const { proxyPort, adminPort } = await proxy.ready;
    for (let i = 0; i < 100; i++) {
      const answer = await request(`http://127.0.0.1:${adminPort}/readyz`).catch(() => undefined);
      await answer?.body.dump();
      if (answer?.statusCode === 200) break;
      await sleep(100);
    }
    log(
      `proxy pid ${proxy.child.pid} on port ${proxyPort}; running ${options.durationMs / 1000} s`,
    );
    const startMs = Date.now();
    const rss = sampleRss(proxy.child.pid, startMs);
    const pool = new Pool(`http://127.0.0.1:${proxyPort}`, { connections: options.concurrency });
    const at = (ms, what, action) =>
      sleep(ms).then(() => {
        log(`${(ms / 1000).toFixed(0)} s: ${what}`);
        action();
      });
    const outage = (_req, res) =>
      res.writeHead(503, { "content-type": "text/plain" }).end("maintenance");
    const [load] = await Promise.all([
      runLoad(pool, options),
      at(options.rotateAtMs, "IdP accepts old and new client; secret volume rotated", () => {
        emulator.setClients([OLD, NEW]);
        writeCredentials(volume, 2, NEW);
      }),
      at(options.dropOldAtMs, "IdP drops the old client", () => emulator.setClients([NEW])),
      at(options.outageAtMs, "token endpoint outage starts", () => emulator.setTokenFault(outage)),
      at(options.outageAtMs + options.outageMs, "token endpoint back", () =>
        emulator.setTokenFault(undefined),
      ),
    ]);
    rss.stop();
    await pool.close();
    const { md, passed } = summarize(options, load, tap.exchanges, rss.samples, proxy, startMs);
    const stopCode = await proxy.stop();
    process.stdout.write(`${md}\nProxy exit code after SIGTERM: ${stopCode}; log: ${logFile}\n`);
    mkdirSync(options.outDir, { recursive: true });
    const stamp = new Date(startMs).toISOString().replace(/[:.]/g, "-");
    const file = join(options.outDir, `soak-${stamp}${options.short ? "-short" : ""}.md`);
    writeFileSync(file, md);
    log(`written ${file}`);
    exitCode = passed && stopCode === 0 ? 0 : 1;
  } finally {
    await proxy.stop();
    await tap.close();
    await emulator.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return exitCode;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    log(error.stack ?? String(error));
    process.exit(1);
  },
);
