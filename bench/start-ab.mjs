/**
 * Start → ready of two builds of the CLI, interleaved start by start (issue 33): each Node, one
 * flag set, configured from the environment as bench/footprint.mjs's idle cell is (one
 * credential, the local token emulator), pinned to one core. Where footprint.mjs measures a
 * build beside the runtime's floor, this is its before/after: the order alternates every round
 * so that neither build always starts on a warmer machine.
 *
 *   node bench/start-ab.mjs --a OLD/cli.cjs --b dist/bundle/cli.cjs [--rounds 10]
 *     [--nodes PATH,PATH] [--flags "image"|"sidecar"|"FLAGS"]
 *     [--env-a "K=V K=V"] [--env-b "K=V …"]
 * `--env-a`/`--env-b` add environment to one side only (the same build with and without a
 * setting). Prints medians and minima of the wall time to the first `/readyz` 200 and of the CPU
 * used until then, per Node and side.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { defaultNodes, FLAG_SETS, sidecarEnv, splitFlagSet, startProxy } from "./footprint.mjs";
import { startEmulatorProcess } from "./lib/bearer-proxy.mjs";
import { createBenchCertificates } from "./lib/certs.mjs";
import { findFreePort } from "./lib/competitors.mjs";
import { createControlClient } from "./lib/control-client.mjs";
import { canPin, stopAllChildren, stopChild } from "./lib/processes.mjs";
import { median } from "./lib/summarize.mjs";

const { values } = parseArgs({
  options: {
    a: { type: "string" },
    b: { type: "string" },
    rounds: { type: "string", default: "10" },
    nodes: { type: "string" },
    flags: { type: "string", default: "image" },
    "env-a": { type: "string", default: "" },
    "env-b": { type: "string", default: "" },
  },
});
if (!values.a || !values.b) {
  process.stderr.write("usage: node bench/start-ab.mjs --a CLI --b CLI [--rounds N]\n");
  process.exit(2);
}
/** "K=V K=V" (a flag set's environment words, footprint.mjs `splitFlagSet`) → environment. */
function envOf(text, flag) {
  const { args, env } = splitFlagSet(text);
  if (args.length > 0) {
    process.stderr.write(`start-ab: ${flag} takes NAME=value words only, not ${args.join(" ")}\n`);
    process.exit(2);
  }
  return env;
}
const sides = [
  { name: "a", cli: resolve(values.a), env: envOf(values["env-a"], "--env-a") },
  { name: "b", cli: resolve(values.b), env: envOf(values["env-b"], "--env-b") },
];
const flagSet = FLAG_SETS[values.flags] ?? values.flags;
const nodes = values.nodes?.split(",") ?? defaultNodes();
const core = canPin() ? 0 : null;

const dir = await mkdtemp(join(tmpdir(), "bearer-proxy-start-ab-"));
const certs = await createBenchCertificates(dir);
const control = createControlClient(certs.caPem);
const emulator = await startEmulatorProcess({ core: core === null ? null : 1, certs });
const secretFile = join(dir, "client-secret");
await writeFile(secretFile, "demo-secret\n", { mode: 0o600 });
const samples = new Map();
try {
  for (let round = 0; round < Number(values.rounds); round++) {
    for (const node of nodes) {
      for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
        const [port, adminPort] = [await findFreePort(), await findFreePort()];
        const proxy = await startProxy({
          node,
          flagSet,
          core,
          control,
          adminPort,
          cliArgs: [side.cli],
          env: { ...sidecarEnv({ emulator, certs, secretFile, port, adminPort }), ...side.env },
        });
        await stopChild(proxy.child, 10_000);
        const key = `${node} ${side.name}`;
        if (!samples.has(key)) samples.set(key, []);
        samples.get(key).push(proxy);
      }
    }
  }
  process.stdout.write(`start-ab: flags \`${flagSet}\`, ${values.rounds} rounds\n`);
  for (const [key, runs] of samples) {
    const wall = runs.map((r) => r.readyMs);
    const cpu = runs.map((r) => r.cpuToReadyMs);
    process.stdout.write(
      `${key}: ready ${median(wall).toFixed(0)} ms (min ${Math.min(...wall).toFixed(0)}), ` +
        `CPU to ready ${median(cpu).toFixed(0)} ms (min ${Math.min(...cpu).toFixed(0)})\n`,
    );
  }
} finally {
  await stopAllChildren();
  await control.close();
  await rm(dir, { recursive: true, force: true });
}
