/**
 * Preload (`node --require bench/lib/heap-watch.cjs …`) for bench/peak-probe.mjs: every 100 ms,
 * when V8's high-water mark of malloced memory (`peak_malloced_memory`: the compilers' zones,
 * TurboFan's and the Wasm tiers') has moved, one `HEAP_WATCH {…}` line on stderr with the seconds
 * since start, what V8 has malloced now and its peak, in MiB. Unref'd: it never keeps a process up.
 */
const { getHeapStatistics } = require("node:v8");

const startedAt = Date.now();
let lastPeak = 0;
setInterval(() => {
  const { malloced_memory: now, peak_malloced_memory: peak } = getHeapStatistics();
  if (peak === lastPeak) return;
  lastPeak = peak;
  const mib = (bytes) => Math.round((bytes / 1048576) * 10) / 10;
  const line = { s: (Date.now() - startedAt) / 1000, mallocedMiB: mib(now), peakMiB: mib(peak) };
  process.stderr.write(`HEAP_WATCH ${JSON.stringify(line)}\n`);
}, 100).unref();
