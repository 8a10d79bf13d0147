/**
 * What the run was made on, for the report: machine, Node, tool and library versions.
 */
import { readFileSync } from "node:fs";
import { cpus, loadavg, release } from "node:os";
import { fileURLToPath } from "node:url";

const REPO_DIR = fileURLToPath(new URL("../..", import.meta.url));

function packageVersion(name) {
  const file =
    name === null ? `${REPO_DIR}package.json` : `${REPO_DIR}node_modules/${name}/package.json`;
  try {
    return JSON.parse(readFileSync(file, "utf8")).version;
  } catch {
    return "not installed";
  }
}

/** Name → description pairs for the report's Environment section. */
export function describeEnvironment(tools) {
  const cpuList = cpus();
  return {
    machine: `${cpuList.length} × ${cpuList[0]?.model ?? "unknown CPU"}, Linux ${release()}`,
    "load average (1/5/15 min) at the end": loadavg()
      .map((l) => l.toFixed(2))
      .join(" / "),
    node: process.version,
    nginx: tools.nginx.path ? tools.nginx.version : tools.nginx.note,
    wrk: tools.wrk.path ? tools.wrk.version : tools.wrk.note,
    undici: packageVersion("undici"),
    fastify: packageVersion("fastify"),
    "@fastify/http-proxy": packageVersion("@fastify/http-proxy"),
    "@fastify/reply-from": packageVersion("@fastify/reply-from"),
    "bearer-proxy": packageVersion(null),
  };
}
