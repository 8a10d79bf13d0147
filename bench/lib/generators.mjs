/**
 * Run one load-generator process on the load core and return its parsed `BENCH_RESULT` line.
 * Closed loop: wrk (+ bench/wrk/bench.lua) when installed, else bench/load.mjs. Fixed rate:
 * always bench/fixed-rate.mjs (Debian ships no wrk2).
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnPinned, waitForExit } from "./processes.mjs";

const BENCH_DIR = fileURLToPath(new URL("..", import.meta.url));
/** Extra time a generator gets beyond its nominal duration before it is killed. */
const GRACE_MS = 20_000;
/** How long a generator's stdout may stay open after it exited (nothing else holds the pipe). */
const STDOUT_END_WAIT_MS = 5_000;

async function runGenerator(core, command, args, durationS, env) {
  const child = spawnPinned(core, command, args, { env: { ...process.env, ...env } });
  let stdout = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (chunk) => {
    stdout = (stdout + chunk).slice(-65536);
  });
  const { code, signal } = await waitForExit(child, durationS * 1000 + GRACE_MS);
  // 'exit' can come before the pipe's last bytes are read, and wrk's output reaches the pipe
  // only as it exits (block-buffered): four runs on a busy machine saw both streams empty at
  // 'exit' (the likeliest reading; not reproduced on demand). So the result is read once stdout
  // has ended.
  if (!child.stdout.readableEnded) {
    await new Promise((done) => {
      const timer = setTimeout(done, STDOUT_END_WAIT_MS);
      child.stdout.once("end", () => {
        clearTimeout(timer);
        done();
      });
    });
  }
  const match = /^BENCH_RESULT (.*)$/m.exec(stdout);
  if (!match) {
    throw new Error(
      `${command} produced no result (exit ${code ?? signal}); stderr: ${JSON.stringify(child.stderrText.trim().slice(-500))}; stdout: ${JSON.stringify(stdout.trim().slice(-500))}`,
    );
  }
  return JSON.parse(match[1]);
}

/**
 * Closed-loop load against `url`, sending `headers` (name → value) on every request.
 * @returns {Promise<{rps: number, requests: number, p50Ms: number, p99Ms: number,
 *   errors: number, statusErrors: number, raw: object}>}
 */
export async function runClosedLoop({
  tool,
  core,
  url,
  method,
  bodyBytes,
  connections,
  durationS,
  caFile,
  headers = {},
}) {
  const headerLines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`);
  const raw =
    tool === "wrk"
      ? await runGenerator(
          core,
          "wrk",
          [
            "-t1",
            `-c${connections}`,
            `-d${durationS}s`,
            "--timeout",
            "10s",
            ...headerLines.flatMap((line) => ["-H", line]),
            "-s",
            join(BENCH_DIR, "wrk", "bench.lua"),
            url,
          ],
          durationS,
          { BENCH_METHOD: method, BENCH_BODY_BYTES: String(bodyBytes) },
        )
      : await runGenerator(
          core,
          process.execPath,
          [
            join(BENCH_DIR, "load.mjs"),
            ...["--url", url, "--method", method, "--body-bytes", String(bodyBytes)],
            ...["--connections", String(connections), "--duration", String(durationS)],
            ...headerLines.flatMap((line) => ["--header", line]),
            ...(url.startsWith("https:") ? ["--ca", caFile] : []),
          ],
          durationS,
        );
  const errors = raw.connectErrors + raw.readErrors + raw.writeErrors + raw.timeouts;
  return {
    rps: raw.requests / (raw.durationUs / 1e6),
    requests: raw.requests,
    p50Ms: raw.p50Us / 1000,
    p99Ms: raw.p99Us / 1000,
    errors,
    statusErrors: raw.statusErrors,
    raw,
  };
}

/** Open-loop load at `rate` req/s; latency from each request's intended send time. */
export async function runFixedRate({ core, url, rate, durationS, warmupS, caFile }) {
  const raw = await runGenerator(
    core,
    process.execPath,
    [
      join(BENCH_DIR, "fixed-rate.mjs"),
      ...["--url", url, "--rate", String(rate), "--duration", String(durationS)],
      ...["--warmup", String(warmupS)],
      ...(url.startsWith("https:") ? ["--ca", caFile] : []),
    ],
    durationS + warmupS,
  );
  return {
    rps: raw.achievedRate,
    requests: raw.requests,
    p50Ms: raw.p50Us / 1000,
    p99Ms: raw.p99Us / 1000,
    p999Ms: raw.p999Us / 1000,
    maxMs: raw.maxUs / 1000,
    typicalSecondP99Ms: raw.typicalSecondP99Us / 1000,
    errors: raw.errors + (raw.sent - raw.requests - raw.errors),
    statusErrors: raw.statusErrors,
    raw,
  };
}
