/**
 * The floors of the `rate-limit`, `callers-sa` and `callers-basic` variants (issue 33): what
 * their gates cost a request in a hot loop, through the real code in dist/, beside what the
 * plain path pays at the same gate. The proxy runs the same calls per request and also pays
 * what node:http does with the bytes the feature adds (the RateLimit fields it writes, the
 * ~0.9 KiB Proxy-Authorization it parses), so a variant's added CPU in the bench is this plus
 * that, plus its garbage.
 *
 *   node bench/gate-floor.mjs [--rounds N] [--iterations N] [--only ROWS] [--json]
 *
 * Rows (per request: wall ns, median and min over rounds, and CPU ns, process.cpuUsage as
 * feature-floor.mjs counts it), each in a process of its own (as in the proxy, a gate sees one
 * kind of pacing or caller: two rows in one process would make the shared code polymorphic and
 * slower than it is):
 * - `pacing-open`: the pacing gate of an upstream without a `rateLimit` (plain's: an unlimited
 *   pacer, no RateLimit value);
 * - `pacing-limit`: the gate of `rateLimit: {requests: 1e9, per: 1s}` (never binds): the GCRA
 *   update, the admission and its RateLimit value;
 * - `caller-sa`: the caller gate for a cached service-account token on a kept-alive connection
 *   (each request's header a string of its own, as node:http makes it);
 * - `caller-basic`: the same for a cached Basic user of an htpasswd file (bcrypt runs once,
 *   before the loop, as the proxy runs it once per 5 minutes).
 * `--json` prints one JSON line (`{node, rounds, iterations, rows: [{key, label, cpuUs, wallUs}]}`,
 * µs per request) instead of the lines: bench/run.mjs reads it (lib/variant-floor.mjs).
 * Needs `npm run build`; `BENCH_BEARER_PROXY_CLI` names another build's cli.js (as for run.mjs).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import bcrypt from "bcryptjs";
import { DIST, fromDist } from "./lib/dist.mjs";
import { median } from "./lib/summarize.mjs";

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "7" },
    iterations: { type: "string", default: "500000" },
    only: { type: "string" },
    json: { type: "boolean", default: false },
    // One row in this process (the parent runs each row's child with it).
    row: { type: "string" },
  },
});
const ROWS = {
  "pacing-open": "pacing gate, no rateLimit (plain's)",
  "pacing-limit": "pacing gate, a rateLimit that never binds",
  "caller-sa": "caller gate, cached service-account token",
  "caller-basic": "caller gate, cached Basic user (htpasswd, bcrypt)",
};
if (values.row === undefined) {
  const only =
    values.only
      ?.split(",")
      .map((s) => s.trim())
      .filter(Boolean) ?? Object.keys(ROWS);
  const unknown = only.filter((row) => !(row in ROWS));
  if (unknown.length > 0 || only.length === 0) {
    throw new Error(`--only: a comma list of ${Object.keys(ROWS).join(", ")}`);
  }
  const rowArgs = ["--rounds", values.rounds, "--iterations", values.iterations];
  const own = fileURLToPath(import.meta.url);
  const outputs = only.map((row) =>
    execFileSync(
      process.execPath,
      [own, ...rowArgs, "--row", row, ...(values.json ? ["--json"] : [])],
      {
        encoding: "utf8",
      },
    ),
  );
  if (values.json) {
    const rows = outputs.map((out) => JSON.parse(out.trim().split("\n").pop()));
    const meta = {
      node: process.version,
      rounds: Number(values.rounds),
      iterations: Number(values.iterations),
    };
    process.stdout.write(`${JSON.stringify({ ...meta, rows })}\n`);
  } else {
    console.log(
      `node ${process.version}, ${values.rounds} rounds × ${values.iterations} (${DIST})`,
    );
    for (const out of outputs) process.stdout.write(out);
  }
  process.exit(0);
}
if (!(values.row in ROWS)) throw new Error(`--row: one of ${Object.keys(ROWS).join(", ")}`);
const rounds = Number(values.rounds);
const iterations = Number(values.iterations);

const { createLocalPacer } = await fromDist("pacing/local-pacer.js");
const { createUpstreamPacing } = await fromDist("pacing/upstream-pacing.js");
const { passGate, budgetKey } = await fromDist("pacing/gate.js");
const { createCallerGate } = await fromDist("callers/caller-gate.js");
const { createCallerAuthenticator } = await fromDist("callers/authenticate.js");
const { createFailureThrottle } = await fromDist("callers/failure-throttle.js");
const { createConnectionProofs } = await fromDist("callers/connection-proofs.js");
const { createDenialLog } = await fromDist("callers/denial-log.js");
const { createMetrics } = await fromDist("observability/metrics.js");

const metrics = createMetrics({ collectProcessMetrics: false });
const retry = { attempts: 0, on: [], budgetPercent: 10 };
const peer = { remoteAddress: "127.0.0.1" };
let sink = 0;

function pacingRow(limited) {
  const rate = { requests: 1e9, perMs: 1_000, burst: 0 };
  const rateLimit = { ...rate, waitMs: 0, by: "upstream", scope: "local" };
  const pacer = createLocalPacer({ rate: limited ? rate : undefined, waitMs: 0 });
  const pacing = createUpstreamPacing({
    upstream: "u",
    pacer,
    rateLimit: limited ? rateLimit : undefined,
    maxPauseMs: 60_000,
    retry,
    metrics,
  });
  const waiting = { room: { enter: () => undefined, leave() {} }, limits: {} };
  // What the pacing stage hands the gate (proxy/pipeline/pacing-stage.ts AtTheGate).
  class AtTheGate {
    finished = false;
    caller = undefined;
    peer = peer;
    leaveLoad() {}
    resumeLoad() {
      return true;
    }
    waitSignal() {
      return new AbortController().signal;
    }
    afterWait() {}
    proceed(_pacing, _key, rateLimitValue) {
      if (rateLimitValue !== "") sink++;
    }
    refuse() {
      throw new Error("a gate that never binds refused");
    }
  }
  return (n) => {
    for (let i = 0; i < n; i++)
      passGate(new AtTheGate(), pacing, budgetKey(pacing, undefined, peer), waiting);
  };
}

/** The caller gate of one upstream allowing `allow`, its authenticator built from `options`. */
async function callerGate(allow, options) {
  const authenticator = createCallerAuthenticator({ pollIntervalMs: 0, ...options });
  const gate = createCallerGate({
    upstreams: [{ name: "u", allow: [allow] }],
    callers: options.callers,
    authenticator: Promise.resolve(authenticator),
    throttle: createFailureThrottle(),
    proofs: createConnectionProofs(),
    denials: createDenialLog(),
    metrics,
  });
  await gate.ready();
  return gate;
}

/** The loop over `header` (each request's a string of its own) once the gate admitted it. */
async function checkLoop(gate, header) {
  // Distinct strings with the same text, as each parsed request's header is.
  const requests = Array.from({ length: 64 }, (_, i) => ({
    socket: peer,
    headers: { "proxy-authorization": `${header}${" ".repeat(i % 2)}`.trimEnd() },
  }));
  const first = await gate.check("u", requests[0]);
  if (!first.allowed) throw new Error(`the bench's caller was refused: ${first.message}`);
  return (n) => {
    for (let i = 0; i < n; i++) if (gate.check("u", requests[i & 63]).allowed) sink++;
  };
}

async function serviceAccountRow() {
  const token = `eyJhbGciOiJFUzI1NiJ9.${"a".repeat(640)}.${"b".repeat(86)}`;
  const serviceAccounts = {
    verify: async () => ({
      ok: true,
      caller: { kind: "serviceAccount", namespace: "bench", name: "client" },
      expiresAtMs: Date.now() + 3_600_000,
    }),
    close() {},
  };
  return checkLoop(
    await callerGate(
      { serviceAccount: "bench/client" },
      { callers: { kubernetes: {} }, serviceAccounts },
    ),
    `Bearer ${token}`,
  );
}

async function basicRow() {
  // What bench/lib/variant-callers.mjs writes: one bcrypt user (cost 10, as `htpasswd -B`).
  const dir = mkdtempSync(join(tmpdir(), "gate-floor-"));
  try {
    const usersFile = join(dir, "users.htpasswd");
    writeFileSync(usersFile, `bench:${await bcrypt.hash("bench-password", 10)}\n`);
    const basic = { usersFile, maxConcurrentChecks: 1, maxQueuedChecks: 100 };
    const credential = Buffer.from("bench:bench-password").toString("base64");
    return await checkLoop(
      await callerGate({ user: "bench" }, { callers: { basic } }),
      `Basic ${credential}`,
    );
  } finally {
    // The users file is read at start; polling is off.
    rmSync(dir, { recursive: true, force: true });
  }
}

const run =
  values.row === "caller-sa"
    ? await serviceAccountRow()
    : values.row === "caller-basic"
      ? await basicRow()
      : pacingRow(values.row === "pacing-limit");
run(iterations / 4);
const ns = [];
const cpuNs = [];
for (let round = 0; round < rounds; round++) {
  const cpuStart = process.cpuUsage();
  const start = process.hrtime.bigint();
  run(iterations);
  ns.push(Number(process.hrtime.bigint() - start) / iterations);
  const cpu = process.cpuUsage(cpuStart);
  cpuNs.push(((cpu.user + cpu.system) * 1000) / iterations);
}
if (sink === 0) throw new Error(`${values.row}: nothing ran`);
if (values.json) {
  // µs, as feature-floor.mjs's rows: lib/variant-floor.mjs reads both alike.
  const us = (list) => ({
    median: median(list) / 1000,
    min: Math.min(...list) / 1000,
    rounds: list.map((v) => v / 1000),
  });
  const row = {
    key: values.row,
    label: ROWS[values.row],
    iterations,
    cpuUs: us(cpuNs),
    wallUs: us(ns),
  };
  process.stdout.write(`${JSON.stringify(row)}\n`);
} else {
  console.log(
    `${values.row.padEnd(13)} ${median(ns).toFixed(0).padStart(5)} ns median (min ${Math.min(...ns).toFixed(0)}; CPU ${median(cpuNs).toFixed(0)} ns median)`,
  );
}
