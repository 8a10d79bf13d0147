/**
 * Idle footprint of one `run` per Node flag variant, with the resident set split by mapping
 * (node binary pages, anonymous memory, malloc heap, shared libraries) and V8's heap spaces —
 * what bench/PROFILE.md's "Footprint" tables are made of. Slower cells are not needed for this,
 * so it is separate from bench/footprint.mjs:
 *   node bench/idle-probe.mjs [--idle S] [--node PATH] [--variant "name=FLAGS"]...
 * FLAGS as in bench/footprint.mjs (node flags and NAME=VALUE environment entries). The proxy is the
 * bundle, dist/bundle/cli.cjs; BENCH_BEARER_PROXY_CLI names another build.
 */
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { sidecarEnv, splitFlagSet } from "./footprint.mjs";
import { startEmulatorProcess } from "./lib/bearer-proxy.mjs";
import { createBenchCertificates } from "./lib/certs.mjs";
import { findFreePort } from "./lib/competitors.mjs";
import { createControlClient } from "./lib/control-client.mjs";
import { measuredEnv } from "./lib/measured-env.mjs";
import { stopChild } from "./lib/processes.mjs";

const REPO_DIR = fileURLToPath(new URL("..", import.meta.url));
/** The bundle, what ships (as bench/footprint.mjs); BENCH_BEARER_PROXY_CLI names another build. */
const CLI = process.env.BENCH_BEARER_PROXY_CLI ?? join(REPO_DIR, "dist", "bundle", "cli.cjs");
const KIB = 1024;

/** RSS by mapping kind, in MiB, from /proc/PID/smaps. */
export async function rssByMapping(pid) {
  const groups = { binary: 0, anonymous: 0, mallocHeap: 0, sharedLibs: 0, other: 0 };
  let kind = "other";
  for (const line of (await readFile(`/proc/${pid}/smaps`, "utf8")).split("\n")) {
    const mapping = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (mapping) {
      const name = mapping[1];
      if (name === "") kind = "anonymous";
      else if (name === "[heap]") kind = "mallocHeap";
      else if (/\.so(\.|$)/.test(name)) kind = "sharedLibs";
      else if (/\/node$/.test(name)) kind = "binary";
      else kind = "other";
    } else if (line.startsWith("Rss:")) {
      groups[kind] += Number(line.split(/\s+/)[1]) / KIB;
    }
  }
  return groups;
}

async function main() {
  const { values } = parseArgs({
    options: {
      idle: { type: "string", default: "10" },
      node: { type: "string", default: process.execPath },
      variant: { type: "string", multiple: true, default: ["defaults="] },
    },
  });
  const dir = await mkdtemp(join(tmpdir(), "bearer-proxy-idle-"));
  const certs = await createBenchCertificates(dir);
  const control = createControlClient(certs.caPem);
  const emulator = await startEmulatorProcess({ core: null, certs });
  const secretFile = join(dir, "secret");
  await writeFile(secretFile, "demo-secret\n", { mode: 0o600 });
  try {
    for (const variant of values.variant) {
      const [name, flagSet = ""] = variant.split(/=(.*)/s);
      const { args, env } = splitFlagSet(flagSet);
      const [port, adminPort] = [await findFreePort(), await findFreePort()];
      // A preload prints V8's heap spaces on SIGUSR2, without touching the program under test.
      const preload = join(dir, "heap-spaces.mjs");
      await writeFile(
        preload,
        `import v8 from "node:v8"; process.on("SIGUSR2", () => process.stderr.write("HEAP " + JSON.stringify({ spaces: v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.physical_space_size]), code: v8.getHeapCodeStatistics(), used: v8.getHeapStatistics().used_heap_size }) + "\\n"));\n`,
      );
      const started = performance.now();
      const child = spawn(values.node, [...args, `--import=${preload}`, CLI, "run"], {
        env: measuredEnv({
          ...env,
          NODE_OPTIONS: "",
          ...sidecarEnv({ emulator, certs, secretFile, port, adminPort }),
        }),
        stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (chunk) => {
        stderr += chunk;
      });
      await control.waitFor200(`http://127.0.0.1:${adminPort}/readyz`, {
        timeoutMs: 30_000,
        isDead: () => child.exitCode !== null,
        intervalMs: 2,
      });
      const readyMs = performance.now() - started;
      await new Promise((r) => setTimeout(r, Number(values.idle) * 1000));
      const mib = await rssByMapping(child.pid);
      child.kill("SIGUSR2");
      await new Promise((r) => setTimeout(r, 300));
      const heap = JSON.parse(/HEAP (.*)/.exec(stderr)?.[1] ?? "{}");
      await stopChild(child, 10_000);
      const total = Object.values(mib).reduce((a, b) => a + b, 0);
      const f = (v) => v.toFixed(1);
      const spaces = (heap.spaces ?? [])
        .filter(([, size]) => size > 256 * KIB)
        .map(([space, size]) => `${space.replace("_space", "")} ${f(size / KIB / KIB)}`)
        .join(", ");
      console.log(
        `${name.padEnd(14)} ready ${readyMs.toFixed(0)} ms  RSS ${f(total)} = binary ${f(mib.binary)} + anon ${f(mib.anonymous)} + malloc ${f(mib.mallocHeap)} + libs ${f(mib.sharedLibs)}  | heap used ${f((heap.used ?? 0) / KIB / KIB)}: ${spaces}`,
      );
    }
  } finally {
    await emulator.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

// Run as a script; bench/peak-probe.mjs imports rssByMapping only.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
