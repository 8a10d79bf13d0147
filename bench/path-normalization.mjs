#!/usr/bin/env node
/**
 * What normalizing request paths at the door (issue 30) costs per request: ns per call of
 * `normalizePath` over typical paths, and of the whole `checkRequest` (the guards the path goes
 * through) on a small GET — optionally beside another build's `checkRequest` (e.g. main's, built
 * elsewhere: `--baseline /tmp/main/dist`), interleaved so machine noise hits both alike.
 *
 *   npm run build && node bench/path-normalization.mjs [--baseline <dist dir>] [--rounds 5]
 */
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: { baseline: { type: "string" }, rounds: { type: "string", default: "5" } },
});
const rounds = Number(values.rounds);
const here = new URL("../dist/", import.meta.url).pathname;
const { normalizePath } = await import(`${here}net/path-normalization.js`);
const { checkRequest } = await import(`${here}proxy/request-guards.js`);
const baseline = values.baseline
  ? (await import(`${values.baseline.replace(/\/$/, "")}/proxy/request-guards.js`)).checkRequest
  : undefined;

const RULES = { mergeSlashes: true, escapedSlashes: "reject" };
const PATHS = {
  "plain /small": "/small",
  "plain /api/v1/users/42/orders": "/api/v1/users/42/orders",
  "%20 (kept) /files/my%20report.pdf": "/files/my%20report.pdf",
  "%7e (decoded) /~user/%7Ehome": "/~user/%7Ehome",
  "// (merged) /api//v1/items": "/api//v1/items",
};
const LIMITS = { maxHeaderCount: 100, maxUrlLengthBytes: 8192 };
const smallGet = (url) => ({
  method: "GET",
  url,
  httpVersionMajor: 1,
  httpVersionMinor: 1,
  rawHeaders: ["Host", "127.0.0.1:8080", "User-Agent", "wrk", "Accept", "*/*"],
  headers: { host: "127.0.0.1:8080", "user-agent": "wrk", accept: "*/*" },
});
const isKnownHost = () => false;

/**
 * CPU ns per call of `fn` over `n` calls (after a warm-up). CPU time, not wall time: on a shared
 * machine other processes' load stretches the wall clock, not this. Each measurement gets a loop
 * of its own (`new Function`), so its call site sees one function, as the guards' call site does
 * in the proxy: a loop shared by every case would turn megamorphic and time the call instead.
 */
function nsPerCall(fn, n = 5_000_000) {
  const loop = new Function(
    "fn",
    "n",
    "let sink = 0; for (let i = 0; i < n; i++) sink += fn() ? 1 : 0; return sink;",
  );
  loop(fn, 300_000);
  const start = process.cpuUsage();
  const sink = loop(fn, n);
  const used = process.cpuUsage(start);
  if (sink === -1) console.log(sink);
  return ((used.user + used.system) * 1000) / n;
}

const results = new Map();
const record = (name, ns) => results.set(name, [...(results.get(name) ?? []), ns]);
for (let round = 0; round < rounds; round++) {
  for (const [name, path] of Object.entries(PATHS)) {
    record(
      `normalizePath ${name}`,
      nsPerCall(() => normalizePath(path, RULES)),
    );
  }
  const req = smallGet("/small");
  if (baseline)
    record(
      "checkRequest GET /small (baseline)",
      nsPerCall(() => baseline(req, LIMITS, isKnownHost)),
    );
  record(
    "checkRequest GET /small",
    nsPerCall(() => checkRequest(req, LIMITS, RULES, isKnownHost)),
  );
  const encoded = smallGet("/~user/%7Ehome?q=1");
  if (baseline) {
    record(
      "checkRequest GET /~user/%7Ehome?q=1 (baseline)",
      nsPerCall(() => baseline(encoded, LIMITS, isKnownHost)),
    );
  }
  record(
    "checkRequest GET /~user/%7Ehome?q=1",
    nsPerCall(() => checkRequest(encoded, LIMITS, RULES, isKnownHost)),
  );
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`node ${process.version}, ${rounds} rounds, median CPU ns per call (min–max)`);
for (const [name, list] of results) {
  const min = Math.min(...list).toFixed(1);
  const max = Math.max(...list).toFixed(1);
  console.log(`${median(list).toFixed(1).padStart(8)} ns  ${name}  (${min}–${max})`);
}
