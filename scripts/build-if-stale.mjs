/**
 * `npm start`'s prestart (and `prepare`): run `npm run build` only when dist/ is older than what
 * it is built from, as make would. After `npm ci` (whose `prepare` built dist/) `npm start`
 * starts at once instead of compiling everything again (about 20 s); after an edit under src/
 * it builds first, as before. `npm run build` always builds.
 *
 * dist/.build-stamp carries the time the last build by this script *started*: a file saved while
 * tsc was running is newer than the stamp, so the next start builds again. Folders count too, so
 * deleting or renaming a source is a change.
 */
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, openSync, readdirSync, statSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const stamp = join(root, "dist", ".build-stamp");
/** Everything the build reads, besides node_modules (which `npm ci` rebuilds after anyway). */
const INPUTS = [
  "src",
  "tsconfig.json",
  "tsconfig.build.json",
  "scripts/build-config-schema.mjs",
  "scripts/build-bundle.mjs",
  "package.json",
  "package-lock.json",
];
/** What `bearer-proxy` needs from a build; missing means build. */
const OUTPUTS = ["dist/cli.js", "dist/config/config-schema.generated.js", "dist/bundle/cli.cjs"];

/** The newest modification time (ms) of a file, or of a folder and everything in it. */
function newestMtimeMs(path) {
  let stat;
  try {
    stat = statSync(path);
  } catch {
    return 0;
  }
  let newest = stat.mtimeMs;
  if (stat.isDirectory()) {
    for (const entry of readdirSync(path)) {
      newest = Math.max(newest, newestMtimeMs(join(path, entry)));
    }
  }
  return newest;
}

/** Why dist/ must be built, or undefined when it is current. */
function staleReason() {
  const missing = OUTPUTS.find((file) => !existsSync(join(root, file)));
  if (missing) return `${missing} is missing`;
  if (!existsSync(stamp)) return "dist/ was not built by npm ci, npm start or npm install";
  const builtAtMs = statSync(stamp).mtimeMs;
  const changed = INPUTS.find((input) => newestMtimeMs(join(root, input)) > builtAtMs);
  return changed === undefined ? undefined : `${changed} changed since the last build`;
}

const reason = staleReason();
if (reason === undefined) {
  process.stderr.write("dist/ is up to date with src/: not rebuilding (npm run build forces it)\n");
} else {
  process.stderr.write(`building dist/: ${reason}\n`);
  const startedAt = new Date();
  // npm_execpath: the npm that runs this script (npm ci, npm start), not whichever is on PATH.
  const npm = process.env.npm_execpath;
  const result = npm
    ? spawnSync(process.execPath, [npm, "run", "build"], { cwd: root, stdio: "inherit" })
    : spawnSync("npm", ["run", "build"], { cwd: root, stdio: "inherit" });
  if (result.status !== 0) process.exit(result.status ?? 1);
  closeSync(openSync(stamp, "w"));
  utimesSync(stamp, startedAt, startedAt);
}
