/**
 * The other competitors on the proxy core while one is measured. Every proxy is pinned to the
 * same core, and one that has just served a cell goes on working for seconds after its load
 * stops (V8's memory reducer, a collection that shrinks the heap, glibc giving memory back): on
 * a single core that time is taken from the next competitor's cell, and its caches with it.
 * The bench records how much CPU the neighbours used during each cell and, with `--isolate`,
 * stops them (SIGSTOP) for the cell and its `--fresh` warm-up. (Stopped neighbours were not what
 * made a late slot cost up to 42 % more — that was the idle gap before it; bench/PROFILE.md.)
 */
import { readCpuSeconds } from "./processes.mjs";

/** Processes of every live competitor but `measured`; not `direct` (it is the upstream). */
export function neighbourPids(competitors, measured) {
  return competitors
    .filter((c) => c !== measured && c.key !== "direct" && !c.isDead())
    .flatMap((c) => c.pids());
}

/**
 * Runs `measure()` with the neighbours' CPU counted and, when `isolate`, the neighbours stopped
 * until it settles (continued whatever happens). Resolves with measure's result and
 * `neighbourCpuMs`, the CPU they used meanwhile.
 */
export async function withNeighbours(pids, isolate, measure) {
  const before = readCpuSeconds(pids);
  if (isolate) signalAll(pids, "SIGSTOP");
  try {
    const result = await measure();
    return { result, neighbourCpuMs: (readCpuSeconds(pids) - before) * 1000 };
  } finally {
    if (isolate) signalAll(pids, "SIGCONT");
  }
}

function signalAll(pids, signal) {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Gone already: nothing to stop or continue.
    }
  }
}
