import { once } from "node:events";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { fairTimeout } from "../../src/base/fair-timeout.js";
import { blockLoop } from "../helpers/wait.js";

const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(
    servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))),
  );
});

/** A loopback peer that answers every write at once, and a client connected to it. */
async function answeringPeer(): Promise<Socket> {
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.on("data", (chunk) => socket.write(chunk));
  });
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  const client = createConnection({ host: "127.0.0.1", port });
  sockets.push(client);
  await once(client, "connect");
  return client;
}

/**
 * Asks the peer, stalls this loop for three times the timeout (the answer arrives meanwhile),
 * and says which came first: the answer or the timeout `arm` set.
 */
async function answerDuringStall(
  arm: (ms: number, onTimeout: () => void) => void,
): Promise<"answer" | "timeout"> {
  const client = await answeringPeer();
  const timeoutMs = 100;
  const outcome = new Promise<"answer" | "timeout">((resolve) => {
    client.once("data", () => resolve("answer"));
    arm(timeoutMs, () => resolve("timeout"));
  });
  client.write("ping");
  blockLoop(3 * timeoutMs);
  return outcome;
}

describe("fairTimeout", () => {
  it("reads an answer that arrived while this loop stalled, where a plain timer times it out", async () => {
    expect(
      await answerDuringStall((ms, onTimeout) => {
        fairTimeout(ms, onTimeout);
      }),
    ).toBe("answer");
    // The control: the same stall with setTimeout blames the peer.
    expect(
      await answerDuringStall((ms, onTimeout) => {
        setTimeout(onTimeout, ms);
      }),
    ).toBe("timeout");
  });

  it("times out once when its timer is on time", async () => {
    let clockReads = 0;
    const fired = new Promise<number>((resolve) => {
      const started = performance.now();
      fairTimeout(30, () => resolve(performance.now() - started), {
        now: () => {
          clockReads++;
          return 0; // never late
        },
      });
    });
    expect(await fired).toBeGreaterThanOrEqual(29);
    expect(clockReads).toBe(2); // armed once, checked once
  });

  it("arms once more when late, and times out when late again", async () => {
    // The clock says the first firing came 10 s after its arming: a stall. The second firing
    // times out without asking the clock.
    const readings = [0, 10_000, 10_000];
    let calls = 0;
    const fired = new Promise<number>((resolve) => {
      const started = performance.now();
      fairTimeout(
        30,
        () => {
          calls++;
          resolve(performance.now() - started);
        },
        { now: () => readings.shift() ?? Number.NaN },
      );
    });
    expect(await fired).toBeGreaterThanOrEqual(2 * 29); // two timers ran
    expect(readings).toEqual([]); // arm, check (late), re-arm
    await new Promise((r) => setTimeout(r, 60));
    expect(calls).toBe(1);
  });

  it("never fires once cancelled", async () => {
    let fired = false;
    const cancel = fairTimeout(20, () => {
      fired = true;
    });
    cancel();
    await new Promise((r) => setTimeout(r, 60));
    expect(fired).toBe(false);
  });
});
