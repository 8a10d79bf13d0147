/**
 * Removing what a packaging test installed (a clone, a global prefix, an unpacked image): trees of
 * thousands of files. `rmSync` blocks the worker for as long as the disk takes, and vitest fails a
 * hook that ran longer than its timeout even when it finished — one CI run spent over 30 s removing
 * a global install. So the removal is asynchronous and its hook gets `REMOVE_TREE_TIMEOUT_MS`.
 */
import { rm } from "node:fs/promises";

/** A hook's timeout for `removeTree`: a loaded machine's disk, not the files, sets it. */
export const REMOVE_TREE_TIMEOUT_MS = 180_000;

/** Remove `dir` and everything under it; nothing when `dir` is unset or already gone. */
export async function removeTree(dir: string | undefined): Promise<void> {
  if (dir) await rm(dir, { recursive: true, force: true, maxRetries: 3 });
}
