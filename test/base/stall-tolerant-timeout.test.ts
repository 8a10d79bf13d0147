import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createConnection, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stallTolerantTimeout } from "../../src/base/stall-tolerant-timeout.js";
import { blockLoop } from "../helpers/wait.js";

/** Long enough that a loaded machine's scheduling delays stay well inside a fraction of it. */
const TIMEOUT_MS = 400;

/**
 * A peer in a process of its own, so it answers while this one is stalled: it answers each
 * write after the number of ms written.
 */
let peer: ChildProcess;
let peerPort: number;
beforeAll(async () => {
  peer = spawn(
    process.execPath,
    [
      "-e",
      `const s = require("node:net").createServer((c) =>
         c.on("data", (d) => setTimeout(() => c.write("ok"), Number(d))).on("error", () => {}));
       s.listen(0, "127.0.0.1", () => console.log(s.address().port));`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  const [line] = (await once(peer.stdout!, "data")) as [Buffer];
  peerPort = Number(line.toString().trim());
});
afterAll(() => {
  peer.kill();
});

async function connectToPeer(): Promise<Socket> {
  const client = createConnection({ host: "127.0.0.1", port: peerPort });
  client.on("error", () => {}); // a reset at the end of a test is of no interest
  await once(client, "connect");
  return client;
}

/**
 * Asks the peer for an answer after `answerAfterMs`, stalls this loop for `stallMs`, and says
 * which this process heard first: the answer or the timeout `arm` set.
 */
async function answerOrTimeout(
  { stallMs, answerAfterMs }: { stallMs: number; answerAfterMs: number },
  arm: (ms: number, onTimeout: () => void) => void,
): Promise<"answer" | "timeout"> {
  const client = await connectToPeer();
  try {
    const outcome = new Promise<"answer" | "timeout">((resolve) => {
      client.once("data", () => resolve("answer"));
      arm(TIMEOUT_MS, () => resolve("timeout"));
    });
    client.write(String(answerAfterMs));
    blockLoop(stallMs);
    return await outcome;
  } finally {
    client.destroy();
  }
}

const tolerant = (ms: number, onTimeout: () => void) => {
  stallTolerantTimeout(ms, onTimeout);
};
const plain = (ms: number, onTimeout: () => void) => {
  setTimeout(onTimeout, ms);
};

describe("stallTolerantTimeout", () => {
  it("reads an answer that landed during a stall shorter than a re-arm's, where a plain timer times it out", async () => {
    // The timer comes 0.4 of its wait late: not re-armed, but it waits for one more poll.
    const shortStall = { stallMs: 1.4 * TIMEOUT_MS, answerAfterMs: 0 };
    expect(await answerOrTimeout(shortStall, tolerant)).toBe("answer");
    expect(await answerOrTimeout(shortStall, plain)).toBe("timeout");
  });

  it("gives the peer a whole wait after a long stall, where a plain timer times it out", async () => {
    // The answer comes 0.4 of a wait after the stall (0.6 of a wait, 240 ms, before the
    // re-armed timer): the timer, 2 waits late, is re-armed.
    const longStall = { stallMs: 3 * TIMEOUT_MS, answerAfterMs: 3.4 * TIMEOUT_MS };
    expect(await answerOrTimeout(longStall, tolerant)).toBe("answer");
    expect(await answerOrTimeout(longStall, plain)).toBe("timeout");
  });

  it("still times out on a peer that never answers, after the stall and one more wait", async () => {
    // Nothing is asked of anyone, so no answer comes.
    const started = performance.now();
    const timedOut = new Promise<number>((resolve) => {
      stallTolerantTimeout(TIMEOUT_MS, () => resolve(performance.now() - started));
    });
    blockLoop(3 * TIMEOUT_MS);
    const elapsed = await timedOut;
    // Re-armed once after the stall: at least the stall and one wait.
    expect(elapsed).toBeGreaterThanOrEqual(4 * TIMEOUT_MS - 5);
  });

  it("times out once, after one wait, when its timer is on time", async () => {
    let clockReads = 0;
    const clock = {
      now: () => {
        clockReads++;
        return 0; // never late
      },
      setTimeout: (fn: () => void, ms: number) => setTimeout(fn, ms),
      clearTimeout: (handle: unknown) => clearTimeout(handle as NodeJS.Timeout),
    };
    const started = performance.now();
    const elapsed = await new Promise<number>((resolve) => {
      stallTolerantTimeout(30, () => resolve(performance.now() - started), clock);
    });
    expect(elapsed).toBeGreaterThanOrEqual(29);
    expect(clockReads).toBe(2); // armed once, checked once
  });

  it("is cancelled by its cancel, before it fires and after a re-arm", async () => {
    let fired = 0;
    stallTolerantTimeout(20, () => fired++)();
    // Re-armed: the first firing comes ~60 ms late, then cancel clears the second timer.
    const cancel = stallTolerantTimeout(20, () => fired++);
    blockLoop(60);
    await new Promise((resolve) => setTimeout(resolve, 5)); // the late firing re-arms
    cancel();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(fired).toBe(0);
  });
});
