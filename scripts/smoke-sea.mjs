/**
 * Smoke run of the single executable (scripts/build-sea.mjs), as .ci/run does after the tests:
 * from an empty folder (no node_modules, no Node on the way), `--version`, then `demo` — the
 * built-in emulator as token endpoint and upstream, the proxy in front — one request through
 * the proxy, and a clean stop on SIGTERM. A few seconds.
 *
 *   node scripts/smoke-sea.mjs [EXECUTABLE]   (default dist/sea/bearer-proxy)
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const executable = resolve(process.argv[2] ?? join(ROOT, "dist/sea/bearer-proxy"));
const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
const cwd = mkdtempSync(join(tmpdir(), "bp-sea-smoke-"));
const fail = (message) => {
  throw new Error(`sea smoke: ${message}`);
};

try {
  const printed = execFileSync(executable, ["--version"], { cwd, encoding: "utf8" }).trim();
  if (printed !== `bearer-proxy ${version}`) fail(`--version printed ${JSON.stringify(printed)}`);

  const started = performance.now();
  const child = spawn(
    executable,
    ["demo", "--port", "0", "--admin-port", "0", "--emulator-port", "0", "--log-format", "json"],
    { cwd, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  const exited = new Promise((r) => child.once("exit", (code, signal) => r(code ?? signal)));
  const proxyUrl = await new Promise((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`demo did not start:\n${output}`)), 20_000);
    const onData = (chunk) => {
      output += chunk;
      const match = /proxy \(plain HTTP[^)]*\): (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    void exited.then((code) => reject(new Error(`demo exited (${code}):\n${output}`)));
  });
  const readyMs = performance.now() - started;
  try {
    const answer = await fetch(`${proxyUrl}/platform/v1/spreadsheets/demo`);
    const body = await answer.json();
    if (answer.status !== 200 || body.id !== "demo") {
      fail(`the request through the proxy answered ${answer.status} ${JSON.stringify(body)}`);
    }
  } finally {
    child.kill("SIGTERM");
  }
  const code = await exited;
  if (code !== 0) fail(`demo exited with ${code} after SIGTERM:\n${output}`);
  process.stdout.write(
    `sea smoke: ok — ${executable}: --version, demo up in ${readyMs.toFixed(0)} ms, one request proxied, clean stop\n`,
  );
} finally {
  rmSync(cwd, { recursive: true, force: true });
}
