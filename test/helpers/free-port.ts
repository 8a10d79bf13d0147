/**
 * A port for a test to hand to a process that binds it later (a child, a restarted server):
 * bench/lib/free-port.mjs, shared with the bench, says why it is drawn from below the kernel's
 * ephemeral range instead of taken from `listen(0)` and released.
 */
const shared = import(new URL("../../bench/lib/free-port.mjs", import.meta.url).href) as Promise<{
  freePort(): Promise<number>;
}>;

/** A free port below the ephemeral range, on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return (await shared).freePort();
}
