/**
 * The floor of the `rate-limit` and `callers-sa` variants (issue 33): what their gates cost a
 * request in a hot loop, through the real code in dist/, beside what the plain path pays at the
 * same gate. The proxy runs the same calls per request and also pays what node:http does with
 * the bytes the feature adds (the RateLimit fields it writes, the ~0.9 KiB Proxy-Authorization
 * it parses), so a variant's added CPU in the bench is this plus that, plus its garbage.
 *
 *   node bench/gate-floor.mjs [--rounds N] [--iterations N] [--only ROW]
 *
 * Rows (ns per request, median and min over rounds), each in a process of its own (as in the
 * proxy, a gate sees one kind of pacing or caller: two rows in one process would make the
 * shared code polymorphic and slower than it is):
 * - `pacing-open`: the pacing gate of an upstream without a `rateLimit` (plain's: an unlimited
 *   pacer, no RateLimit value);
 * - `pacing-limit`: the gate of `rateLimit: {requests: 1e9, per: 1s}` (never binds): the GCRA
 *   update, the admission and its RateLimit value;
 * - `caller-sa`: the caller gate for a cached service-account token on a kept-alive connection
 *   (each request's header a string of its own, as node:http makes it).
 * Needs `npm run build`; `BENCH_BEARER_PROXY_CLI` names another build's cli.js (as for run.mjs).
 */
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { median } from "./lib/summarize.mjs";

const DIST = process.env.BENCH_BEARER_PROXY_CLI
  ? dirname(process.env.BENCH_BEARER_PROXY_CLI)
  : join(dirname(fileURLToPath(import.meta.url)), "..", "dist");
const fromDist = (path) => import(pathToFileURL(join(DIST, path)).href);

const { values } = parseArgs({
  options: {
    rounds: { type: "string", default: "7" },
    iterations: { type: "string", default: "500000" },
    only: { type: "string" },
  },
});
const ROWS = ["pacing-open", "pacing-limit", "caller-sa"];
if (values.only === undefined) {
  console.log(`node ${process.version}, ${values.rounds} rounds × ${values.iterations} (${DIST})`);
  for (const row of ROWS) {
    const args = [fileURLToPath(import.meta.url), ...process.argv.slice(2), "--only", row];
    process.stdout.write(execFileSync(process.execPath, args, { encoding: "utf8" }));
  }
  process.exit(0);
}
if (!ROWS.includes(values.only)) throw new Error(`--only: one of ${ROWS.join(", ")}`);
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

async function callerRow() {
  const token = `eyJhbGciOiJFUzI1NiJ9.${"a".repeat(640)}.${"b".repeat(86)}`;
  const serviceAccounts = {
    verify: async () => ({
      ok: true,
      caller: { kind: "serviceAccount", namespace: "bench", name: "client" },
      expiresAtMs: Date.now() + 3_600_000,
    }),
    close() {},
  };
  const callers = { kubernetes: {} };
  const authenticator = createCallerAuthenticator({ callers, serviceAccounts, pollIntervalMs: 0 });
  const gate = createCallerGate({
    upstreams: [{ name: "u", allow: [{ serviceAccount: "bench/client" }] }],
    callers,
    authenticator: Promise.resolve(authenticator),
    throttle: createFailureThrottle(),
    proofs: createConnectionProofs(),
    denials: createDenialLog(),
    metrics,
  });
  await gate.ready();
  // Distinct strings with the same text, as each parsed request's header is.
  const requests = Array.from({ length: 64 }, (_, i) => ({
    socket: peer,
    headers: { "proxy-authorization": `Bearer ${token}${" ".repeat(i % 2)}`.trimEnd() },
  }));
  const first = await gate.check("u", requests[0]);
  if (!first.allowed) throw new Error("the bench's service account was refused");
  return (n) => {
    for (let i = 0; i < n; i++) if (gate.check("u", requests[i & 63]).allowed) sink++;
  };
}

const run =
  values.only === "caller-sa" ? await callerRow() : pacingRow(values.only === "pacing-limit");
run(iterations / 4);
const ns = [];
for (let round = 0; round < rounds; round++) {
  const start = process.hrtime.bigint();
  run(iterations);
  ns.push(Number(process.hrtime.bigint() - start) / iterations);
}
const min = Math.min(...ns);
console.log(
  `${values.only.padEnd(13)} ${median(ns).toFixed(0).padStart(5)} ns median (min ${min.toFixed(0)})`,
);
if (sink === 0) console.log("(nothing ran)");
