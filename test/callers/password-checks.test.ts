import bcryptjs from "bcryptjs";
import { describe, expect, it } from "vitest";
import {
  createPasswordChecks,
  loadBcryptCompare,
  threadPoolSizeFromEnv,
} from "../../src/callers/password-checks.js";

/**
 * Issue 30: password checks leave the event loop (@node-rs/bcrypt on libuv's thread pool) and
 * pass one bounded queue: at most `maxConcurrent` run, at most `maxQueued` wait, the rest are
 * "busy" at once. The native compare must answer exactly as bcryptjs did for every prefix htpasswd
 * files hold.
 */

/** A compare the test settles by hand, counting what ran. */
function manualCompare() {
  const pending: { password: string; settle(matches: boolean): void }[] = [];
  return {
    pending,
    compare: (password: string) =>
      new Promise<boolean>((resolve) => pending.push({ password, settle: resolve })),
  };
}

const LIMITS = { maxConcurrent: 2, maxQueued: 3 };

describe("the password check queue", () => {
  it("runs maxConcurrent at once, queues maxQueued in order, answers busy beyond", async () => {
    const manual = manualCompare();
    let started = 0;
    const checks = createPasswordChecks({
      compare: manual.compare,
      threadPoolSize: 64,
      onStart: () => started++,
    });
    const results = Array.from({ length: 6 }, (_, i) => checks.verify(`p${i}`, "h", LIMITS));
    expect(results[5]).toBe("busy");
    expect(manual.pending.map((p) => p.password)).toEqual(["p0", "p1"]);
    expect(checks.status()).toMatchObject({ running: 2, queued: 3, started: 2 });

    manual.pending[1]!.settle(true);
    await results[1];
    expect(manual.pending.map((p) => p.password)).toEqual(["p0", "p1", "p2"]);
    expect(checks.verify("p6", "h", LIMITS)).not.toBe("busy"); // room for one more waiting
    expect(checks.verify("p7", "h", LIMITS)).toBe("busy");

    for (let i = 0; i < manual.pending.length; i++) manual.pending[i]!.settle(i % 2 === 0);
    // Settling frees slots for the waiting ones; keep settling until everything ran.
    while (checks.status().running > 0) {
      await new Promise((r) => setImmediate(r));
      for (const p of manual.pending) p.settle(false);
    }
    expect(manual.pending.map((p) => p.password)).toEqual(["p0", "p1", "p2", "p3", "p4", "p6"]);
    expect(await results[0]).toBe(true);
    expect(await results[1]).toBe(true);
    expect(started).toBe(6);
    expect(checks.status()).toMatchObject({ running: 0, queued: 0, started: 6 });
  });

  it("leaves one thread of libuv's pool to DNS and file reads", () => {
    const manual = manualCompare();
    const checks = createPasswordChecks({ compare: manual.compare, threadPoolSize: 4 });
    const limits = { maxConcurrent: 8, maxQueued: 100 };
    for (let i = 0; i < 5; i++) checks.verify(`p${i}`, "h", limits);
    expect(manual.pending).toHaveLength(3);
    expect(checks.status()).toMatchObject({ running: 3, queued: 2, maxConcurrent: 3 });
    expect(threadPoolSizeFromEnv({})).toBe(4);
    expect(threadPoolSizeFromEnv({ UV_THREADPOOL_SIZE: "16" })).toBe(16);
    expect(threadPoolSizeFromEnv({ UV_THREADPOOL_SIZE: "zero" })).toBe(4);
  });

  it("a compare that throws or rejects rejects its own check and frees the slot", async () => {
    let calls = 0;
    const checks = createPasswordChecks({
      compare: () => {
        calls += 1;
        if (calls === 1) throw new Error("sync");
        return Promise.reject(new Error("async"));
      },
    });
    const limits = { maxConcurrent: 1, maxQueued: 1 };
    const first = checks.verify("a", "h", limits);
    const second = checks.verify("b", "h", limits);
    await expect(first).rejects.toThrow("sync");
    await expect(second).rejects.toThrow("async");
    expect(checks.status()).toMatchObject({ running: 0, queued: 0 });
  });
});

describe("the native compare", () => {
  const native = loadBcryptCompare();

  it("is loaded on this platform: checks run on the thread pool", () => {
    expect(native.runsOn).toBe("thread-pool");
    expect(native.fallbackReason).toBeUndefined();
  });

  it("answers as bcryptjs does for $2a$, $2b$ and $2y$ hashes, long, empty and non-ASCII passwords", async () => {
    const passwords = [
      "",
      "a",
      "pässwörd",
      "x".repeat(72),
      "y".repeat(100),
      "ab\0cd",
      "€".repeat(30),
    ];
    const tries = (pw: string) => [pw, `${pw}z`, pw.slice(0, -1), `${"x".repeat(72)}q`, "ab"];
    let compared = 0;
    for (const password of passwords) {
      for (const prefix of ["$2a$", "$2b$", "$2y$"]) {
        const hash = `${prefix}${bcryptjs.hashSync(password, 4).slice(4)}`;
        for (const attempt of tries(password)) {
          const expected = bcryptjs.compareSync(attempt, hash);
          expect(await native.compare(attempt, hash), `${prefix} ${attempt.length}`).toBe(expected);
          compared += 1;
        }
      }
    }
    expect(compared).toBe(105);
  });

  it("without the binary for this platform, falls back to bcryptjs on the event loop", async () => {
    const fallback = loadBcryptCompare(() => {
      throw Object.assign(new Error("Cannot find module"), { code: "MODULE_NOT_FOUND" });
    });
    expect(fallback).toMatchObject({ runsOn: "event-loop", fallbackReason: "MODULE_NOT_FOUND" });
    const hash = bcryptjs.hashSync("pw", 4);
    expect(await fallback.compare("pw", hash)).toBe(true);
    expect(await fallback.compare("px", hash)).toBe(false);
  });

  it("takes the unknown user's placeholder hash (a salt and dots) and says no", async () => {
    const placeholder = `${bcryptjs.genSaltSync(4)}${".".repeat(31)}`;
    expect(await native.compare("anything", placeholder)).toBe(false);
  });

  it("keeps the event loop free: a timer fires on time during a cost-12 check", async () => {
    const hash = bcryptjs.hashSync("pw", 12);
    let ticks = 0;
    let worstGapMs = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      worstGapMs = Math.max(worstGapMs, now - last);
      last = now;
      ticks += 1;
    }, 5);
    const startedMs = performance.now();
    expect(await native.compare("wrong", hash)).toBe(false);
    const checkMs = performance.now() - startedMs;
    clearInterval(timer);
    console.log(
      `[issue 30] cost-12 check ${Math.round(checkMs)} ms; ${ticks} timer ticks, worst gap ${Math.round(worstGapMs)} ms`,
    );
    // bcryptjs on the event loop: one gap as long as the check itself (~300 ms here).
    expect(worstGapMs).toBeLessThan(checkMs / 2);
  });
});
