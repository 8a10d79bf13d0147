/**
 * The build a bench script measures: the one bench/run.mjs runs (`BENCH_BEARER_PROXY_CLI` names
 * its cli.js), else the repository's dist/. Scripts that run bearer-proxy's code in-process
 * (the floors, the undici forwarder's `--feature`) load its modules from here.
 */
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export const DIST = process.env.BENCH_BEARER_PROXY_CLI
  ? dirname(process.env.BENCH_BEARER_PROXY_CLI)
  : fileURLToPath(new URL("../../dist", import.meta.url));

/** `import()` of a module of the build, by its path under dist/. */
export const fromDist = (path) => import(pathToFileURL(join(DIST, path)).href);
