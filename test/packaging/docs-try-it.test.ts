/**
 * Issue 32: every "try it locally" block of the docs runs as written — the emulator with
 * `--ca-out`, a second emulator with its own client, Redis, the proxy's replicas, the curl lines —
 * with `bearer-proxy` on the PATH as the built dist/cli.js, in an empty temporary folder, under
 * bash -e. Only the ports move: the well-known ones a block uses (8080, 9901, 8443, …) become
 * free ports, consistently through the block and the files it writes. A line ending in
 * `# → TEXT` must print TEXT, not inside a longer word or number (its exit status aside: `check`
 * exits 1 when it finds the fault it is shown finding). Blocks that need Docker run only where the image is built.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { freePort, skipWithoutRedis } from "../helpers/redis-server.js";
import { TRY_MARKER, tryBlocks, userPages } from "./docs-tools.js";
import { REPO_ROOT } from "./schema-tools.js";

/** The ports the blocks use, as a reader would type them; each run gets free ones instead. */
const PORTS = [3128, 6379, 8080, 8081, 8443, 8444, 9901, 9902];
const CLI = join(REPO_ROOT, "dist", "cli.js");
const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")) as {
  version: string;
};

/** The block with its ports moved and its `# → TEXT` lines turned into checks. */
function runnableScript(text: string, ports: ReadonlyMap<number, number>): string {
  const moved = text.replace(/\b\d{4}\b/g, (n) => String(ports.get(Number(n)) ?? n));
  const lines = moved.replace(/\s*\\\n\s*/g, " ").split("\n");
  const checked = lines.map((line) => {
    const m = /^(.*?)\s+# → (.+)$/.exec(line);
    if (!m) return line;
    const [, command, expected] = m;
    return [
      `__out=$( { ${command} ; } 2>&1 ) || true`,
      `printf '%s\\n' "$__out"`,
      `__expect ${shellQuote(expected!)} "$__out"`,
    ].join("; ");
  });
  // TEXT must stand on its own in the output: `→ 2` is not met by "12", nor `→ 200` by "2001".
  const expect =
    '__expect() { [[ "$2" =~ (^|[^[:alnum:]_])"$1"($|[^[:alnum:]_]) ]] || { printf \'expected "%s" in the output above\\n\' "$1" >&2; exit 1; }; }';
  return [expect, ...checked].join("\n");
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** Ports a block names that the runner would not move (a fixed port could be taken). */
function unmovedPorts(text: string): number[] {
  const named = [...text.matchAll(/(?:127\.0\.0\.1:|localhost:|port[: ]\s*|--port\s+)(\d{2,5})\b/g)]
    .map((m) => Number(m[1]))
    .filter((port) => port !== 0);
  return [...new Set(named.filter((port) => !PORTS.includes(port)))];
}

interface Run {
  child: ChildProcess;
  done: Promise<{ code: number | null; output: string }>;
  dir: string;
}

const runs: Run[] = [];

/** Below the test's own timeout (120 s), so a hung block reports its output. */
const BLOCK_DEADLINE_MS = 100_000;

/** How long a block's output is waited for once bash has exited. */
const OUTPUT_DRAIN_MS = 5_000;

function killGroup(child: ChildProcess, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-child.pid!, signal);
    return true;
  } catch {
    return false; // no process of the group is left
  }
}

afterEach(async () => {
  // The block's own `kill %1 …` ends its background jobs when it gets there; after a failure,
  // end the whole process group (bash, emulators, proxies, redis) here.
  for (const run of runs.splice(0)) {
    for (const signal of ["SIGTERM", "SIGKILL"] as const) {
      if (!killGroup(run.child, signal)) break;
      await new Promise((r) => setTimeout(r, 1_000));
    }
    rmSync(run.dir, { recursive: true, force: true });
  }
});

async function runBlock(text: string): Promise<{ code: number | null; output: string }> {
  const dir = mkdtempSync(join(tmpdir(), "bp-try-it-"));
  const bin = join(dir, ".bin");
  spawnSync("mkdir", [bin]);
  const shim = join(bin, "bearer-proxy");
  writeFileSync(shim, `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
  chmodSync(shim, 0o755);
  const ports = new Map<number, number>();
  for (const port of PORTS) ports.set(port, await freePort());
  const child = spawn("bash", ["-e", "-o", "pipefail", "-c", runnableScript(text, ports)], {
    cwd: dir,
    detached: true,
    env: {
      PATH: [bin, dirname(process.execPath), process.env.PATH ?? "/usr/bin:/bin"].join(":"),
      HOME: dir,
      LANG: "C.UTF-8",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const done = new Promise<{ code: number | null; output: string }>((resolve) => {
    // A block that hangs fails with what it printed, not with vitest's bare timeout.
    const deadline = setTimeout(() => {
      output += `\n[the block was still running after ${BLOCK_DEADLINE_MS / 1000} s: stopped]\n`;
      killGroup(child, "SIGKILL");
    }, BLOCK_DEADLINE_MS);
    // The block ends when bash does. A background job it started and did not end (or that is
    // slow to) may still hold the output pipe open: its output is waited for, briefly, and the
    // group is ended by afterEach.
    child.on("exit", (code, signal) => {
      clearTimeout(deadline);
      let finished = false;
      const finish = () => {
        // Once: after the drain timer, 'close' may still come, when afterEach has removed the
        // folder whose logs it would read again.
        if (finished) return;
        finished = true;
        const status = code ?? (signal ? 128 : null);
        // A failed block also shows what its background jobs logged (a replica's reason).
        resolve({ code: status, output: status === 0 ? output : output + logTails(dir) });
      };
      const drained = setTimeout(() => {
        console.warn(
          `try-it block: background jobs still hold its output ${OUTPUT_DRAIN_MS} ms after bash exited`,
        );
        finish();
      }, OUTPUT_DRAIN_MS);
      child.on("close", () => {
        clearTimeout(drained);
        finish();
      });
    });
  });
  runs.push({ child, done, dir });
  return done;
}

/** The last lines of each `*.log` file a block wrote, for a failure's report. */
function logTails(dir: string, lines = 30): string {
  const logs = readdirSync(dir).filter((name) => name.endsWith(".log"));
  return logs
    .map((name) => {
      const tail = readFileSync(join(dir, name), "utf8").trimEnd().split("\n").slice(-lines);
      return `\n--- the last ${tail.length} lines of ${name} ---\n${tail.join("\n")}\n`;
    })
    .join("");
}

const dockerImage = `bearer-proxy:${pkg.version}`;
const hasImage =
  spawnSync("docker", ["image", "inspect", dockerImage], { stdio: "ignore" }).status === 0;

const blocks = tryBlocks(userPages());

describe("the try-it runner itself", () => {
  it("moves the ports and checks the → lines", () => {
    const script = runnableScript(
      "bearer-proxy wait --admin http://127.0.0.1:9901 \\\n  --timeout 30s\ncurl -s http://127.0.0.1:8080/x   # → 200\n",
      new Map([
        [9901, 40001],
        [8080, 40002],
      ]),
    );
    expect(script).toContain("bearer-proxy wait --admin http://127.0.0.1:40001 --timeout 30s");
    expect(script).toContain("__out=$( { curl -s http://127.0.0.1:40002/x ; } 2>&1 ) || true");
    expect(script).toContain(`__expect '200' "$__out"`);
  });

  it("fails a block whose → line prints something else, with its logs' last lines", async () => {
    const result = await runBlock(
      `${TRY_MARKER}\necho 'the replica said why' > replica.log\necho 403   # → 200\n`,
    );
    expect(result.code).not.toBe(0);
    expect(result.output).toContain('expected "200" in the output above');
    expect(result.output).toContain("the last 1 lines of replica.log ---\nthe replica said why");
  });

  it("takes a → line's text as a whole word or number, not as part of a longer one", async () => {
    const longer = await runBlock(`${TRY_MARKER}\necho 12   # → 2\n`);
    expect(longer.code).not.toBe(0);
    expect(longer.output).toContain('expected "2" in the output above');
    const within = await runBlock(
      `${TRY_MARKER}\necho '{"error":{"code":"token_rejected"}}'   # → token_rejected\necho 'HTTP/1.1 407 x'   # → 407\n`,
    );
    expect(within.code, within.output).toBe(0);
  });

  it("finds the blocks, at least one per guide", () => {
    expect(blocks.length).toBeGreaterThanOrEqual(5);
  });
});

describe.each(blocks)("$page, the try-it block at line $line", ({ text }) => {
  it("names only ports the runner moves", () => {
    expect(unmovedPorts(text)).toEqual([]);
  });

  const needsDocker = /^\s*docker\s/m.test(text);
  const needsRedis = /\bredis-server\b/.test(text);
  it.skipIf((needsDocker && !hasImage) || (needsRedis && skipWithoutRedis))(
    needsDocker ? `runs as written (needs the image ${dockerImage})` : "runs as written",
    async () => {
      const { code, output } = await runBlock(text);
      expect(code, output).toBe(0);
    },
    120_000,
  );
});
