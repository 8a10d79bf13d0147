/**
 * Where the peak RSS of the footprint's load cell is, round by round (issue 33, eleventh pass):
 * one `run` per round, configured as bench/footprint.mjs configures it (from the environment,
 * the token emulator as upstream, access log on), idle 10 s, then GET /small at 2,000 req/s for
 * 20 s after 2 s unrecorded. It prints per round the resident set by mapping at idle and at the
 * peak (node binary, anonymous: V8's heap and thread arenas, glibc's main heap, libraries), a
 * series of RSS / main heap / anonymous / open sockets every 0.5 s, and V8's malloced memory
 * and its high-water mark as they move (lib/heap-watch.cjs, preloaded): the compilers' working
 * memory, which is what made the cell's peak bimodal.
 *
 *   node bench/peak-probe.mjs [--rounds 3] [--node PATH] [--flags="NODE FLAGS NAME=VALUE…"]
 *
 * FLAGS as bench/footprint.mjs's flag sets (Node flags, and NAME=VALUE words for the
 * environment), given with `=` (parseArgs takes a value that starts with - only that way);
 * default the image's (`--max-semi-space-size=8 MALLOC_ARENA_MAX=2`). Needs `npm run build`
 * and two cores (the proxy on core 0, upstream, emulator and load on core 1).
 */
import { readdirSync, readlinkSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { FLAG_SETS, sidecarEnv, splitFlagSet } from "./footprint.mjs";
import { rssByMapping } from "./idle-probe.mjs";
import { startBackends } from "./lib/backends.mjs";
import { findFreePort } from "./lib/competitors.mjs";
import { runFixedRate } from "./lib/generators.mjs";
import { measuredEnv } from "./lib/measured-env.mjs";
import { readRssBytes, spawnPinned, stopAllChildren, stopChild } from "./lib/processes.mjs";

const REPO_DIR = fileURLToPath(new URL("..", import.meta.url));
const HEAP_WATCH = join(REPO_DIR, "bench", "lib", "heap-watch.cjs");
const MIB = 1024 * 1024;
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "3" },
    node: { type: "string", default: process.execPath },
    flags: { type: "string", default: FLAG_SETS.image },
  },
});
const { args: nodeArgs, env: flagEnv } = splitFlagSet(values.flags);
const mappings = (m) =>
  Object.entries(m)
    .map(([kind, mib]) => `${kind} ${mib.toFixed(1)}`)
    .join(", ");

/** Sockets the process holds open (client connections and upstream ones). */
function socketCount(pid) {
  let sockets = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:")) sockets++;
    } catch {
      // closed since the listing
    }
  }
  return sockets;
}

const dir = await mkdtemp(join(tmpdir(), "bearer-proxy-peak-"));
try {
  const backends = await startBackends({ dir, core: 1 });
  const secretFile = join(dir, "secret");
  await writeFile(secretFile, "demo-secret\n", { mode: 0o600 });
  console.log(`node ${values.node}, flags \`${values.flags}\`\n`);
  for (let round = 1; round <= Number(values.rounds); round++) {
    const [port, adminPort] = [await findFreePort(), await findFreePort()];
    const child = spawnPinned(
      0,
      values.node,
      [...nodeArgs, "--require", HEAP_WATCH, join(REPO_DIR, "dist/bundle/cli.cjs"), "run"],
      {
        env: measuredEnv({
          NODE_OPTIONS: "",
          ...flagEnv,
          ...sidecarEnv({ ...backends, secretFile, port, adminPort }),
        }),
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    const startedAt = performance.now();
    const since = () => ((performance.now() - startedAt) / 1000).toFixed(1);
    const heap = [];
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (text) => {
      for (const line of text.split("\n")) {
        if (!line.startsWith("HEAP_WATCH ")) continue;
        const { s, mallocedMiB, peakMiB } = JSON.parse(line.slice(11));
        heap.push(`${s.toFixed(1)} s: ${mallocedMiB} now, peak ${peakMiB}`);
      }
    });
    await backends.control.waitFor200(`http://127.0.0.1:${adminPort}/readyz`, {
      timeoutMs: 20_000,
      intervalMs: 5,
    });
    await sleep(10_000);
    const idle = await rssByMapping(child.pid);
    let peak = { rssMiB: 0 };
    const series = [];
    let sampling = true;
    const sampler = (async () => {
      for (let tick = 0; sampling; tick++) {
        const rssMiB = readRssBytes([child.pid]) / MIB;
        const newPeak = rssMiB > peak.rssMiB;
        const inSeries = tick % 5 === 0;
        // One read of smaps serves both: the peak's split and the series point.
        const by = newPeak || inSeries ? await rssByMapping(child.pid) : undefined;
        if (newPeak) peak = { rssMiB, at: since(), by };
        if (inSeries) {
          series.push(
            `${since()} s ${rssMiB.toFixed(0)} (heap ${by.mallocHeap.toFixed(0)}, anon ${by.anonymous.toFixed(0)}, ${socketCount(child.pid)} sockets)`,
          );
        }
        await sleep(100);
      }
    })();
    await runFixedRate({
      core: 1,
      url: `http://127.0.0.1:${port}/small`,
      rate: 2000,
      durationS: 20,
      warmupS: 2,
      caFile: backends.certs.caFile,
    });
    sampling = false;
    await sampler;
    console.log(`## round ${round}\n`);
    console.log(`- idle (10 s after ready): ${mappings(idle)} MiB`);
    console.log(
      `- **peak ${peak.rssMiB.toFixed(1)} MiB** at ${peak.at} s: ${mappings(peak.by)} MiB`,
    );
    console.log(`- V8 malloced (MiB, as its high-water mark moved): ${heap.join("; ")}`);
    console.log(`- every 0.5 s from the load's start: ${series.join("; ")}\n`);
    await stopChild(child);
  }
  await backends.control.close();
} finally {
  await stopAllChildren();
  await rm(dir, { recursive: true, force: true });
}
