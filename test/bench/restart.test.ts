/**
 * Issue 33: `--fresh` gives each round its own bearer-proxy process, so one process's JIT luck
 * shows as spread between rounds. What a restart must keep (the competitor the run holds, its
 * key and headers) and replace (the process and everything bound to it), with real children.
 */
import { spawn } from "node:child_process";
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
