/**
 * Issue 33: `--fresh` gives each round its own bearer-proxy process, so one process's JIT luck
 * shows as spread between rounds. What a restart must keep (the competitor the run holds, its
 * key and headers) and replace (the process and everything bound to it), with real children.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

interface Competitor {
  key: string;
  headers?: Record<string, string>;
  child: ReturnType<typeof spawn>;
  baseUrl: string;
  pids(): number[];
  isDead(): boolean;
  stop(): Promise<void>;
  restart?(): Promise<void>;
  processesStarted?: number;
}
const bench = (path: string) => import(new URL(`../../bench/lib/${path}`, import.meta.url).href);
const { makeRestartable, restartAll } = (await bench("restart.mjs")) as {
  makeRestartable(
    c: Competitor,
    startAgain: () => Promise<Partial<Competitor>>,
    hooks?: { beforeStop?(c: Competitor): unknown; afterStop?(c: Competitor): unknown },
  ): Competitor;
  restartAll(
    cs: Competitor[],
    o: { log(line: string): void; problems: string[] },
  ): Promise<Competitor[]>;
};

let serial = 0;
/** A process standing in for a proxy: alive until stopped. */
function startSleeper(): Omit<Competitor, "key"> {
  const child = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  serial += 1;
  return {
    child,
    baseUrl: `http://127.0.0.1:${serial}`,
    pids: () => [child.pid ?? -1],
    isDead: () => child.exitCode !== null || child.signalCode !== null,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

describe("bench --fresh restarts", () => {
  it("replaces the process and what belongs to it, keeps what belongs to the competitor", async () => {
    const order: string[] = [];
    const first = startSleeper();
    const competitor = makeRestartable(
      { ...first, key: "bearer-proxy variant x", headers: { a: "b" } },
      async () => {
        order.push("start");
        return startSleeper();
      },
      {
        beforeStop: (c) => order.push(`before:${c.isDead() ? "dead" : "alive"}`),
        afterStop: (c) => order.push(`after:${c.isDead() ? "dead" : "alive"}`),
      },
    );
    const firstPid = competitor.pids()[0];
    await competitor.restart?.();
    try {
      expect(order).toEqual(["before:alive", "after:dead", "start"]);
      expect(first.isDead()).toBe(true);
      expect(competitor.pids()[0]).not.toBe(firstPid);
      expect(competitor.isDead()).toBe(false);
      expect(competitor.baseUrl).not.toBe(first.baseUrl);
      expect(competitor.key).toBe("bearer-proxy variant x");
      expect(competitor.headers).toEqual({ a: "b" });
      expect(competitor.processesStarted).toBe(2);
    } finally {
      await competitor.stop();
    }
  });

  it("restartAll leaves a competitor that cannot come back dead, says so, and goes on", async () => {
    const problems: string[] = [];
    const broken = makeRestartable({ ...startSleeper(), key: "broken" }, async () => {
      throw new Error("port taken");
    });
    const fine = makeRestartable({ ...startSleeper(), key: "fine" }, async () => startSleeper());
    const fixed: Competitor = { ...startSleeper(), key: "nginx" };
    const fixedPid = fixed.pids()[0];
    try {
      const restarted = await restartAll([broken, fine, fixed], { log: () => {}, problems });
      expect(restarted.map((c) => c.key)).toEqual(["fine"]);
      expect(broken.isDead()).toBe(true);
      expect(problems).toEqual(["broken failed to restart: port taken"]);
      expect(fixed.pids()[0]).toBe(fixedPid);
      expect(fixed.isDead()).toBe(false);
    } finally {
      await Promise.all([fine.stop(), fixed.stop()]);
    }
  });
});

const { withNeighbours } = (await bench("neighbours.mjs")) as {
  withNeighbours<T>(
    pids: number[],
    isolate: boolean,
    measure: () => Promise<T>,
  ): Promise<{ result: T; neighbourCpuMs: number }>;
};

/** The scheduler state of `pid` (/proc/<pid>/stat field 3): `T` when stopped. */
function stateOf(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] ?? "?";
}

const { readCpuSeconds } = (await bench("processes.mjs")) as {
  readCpuSeconds(pids: number[]): number;
};
const cpuMsOf = (pid: number) => readCpuSeconds([pid]) * 1000;

describe("bench --isolate", () => {
  it("stops the neighbours for the cell, continues them after, even when the cell throws", async () => {
    const busy = spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" });
    const pid = busy.pid ?? -1;
    try {
      const seen = await withNeighbours([pid], true, async () => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        return stateOf(pid);
      });
      expect(seen.result).toBe("T");
      // A stopped neighbour takes no CPU from the cell (a busy loop would take ~300 ms).
      expect(seen.neighbourCpuMs).toBeLessThan(50);
      expect(stateOf(pid)).not.toBe("T");
      await expect(
        withNeighbours([pid], true, async () => {
          throw new Error("cell failed");
        }),
      ).rejects.toThrow("cell failed");
      expect(stateOf(pid)).not.toBe("T");
      // Without isolate the neighbour runs, and its CPU is counted: the cell lasts until the
      // neighbour has used 60 ms of it (a loaded machine gives it less than all of a core).
      const counted = await withNeighbours([pid], false, async () => {
        const start = cpuMsOf(pid);
        const deadline = Date.now() + 20_000;
        while (cpuMsOf(pid) - start < 60 && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        return stateOf(pid);
      });
      expect(counted.result).not.toBe("T");
      expect(counted.neighbourCpuMs).toBeGreaterThanOrEqual(60);
    } finally {
      busy.kill("SIGKILL");
    }
  });
});
