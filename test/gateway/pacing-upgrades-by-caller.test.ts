import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import type { AppUnderTest } from "../helpers/app-under-test.js";
import { accessLines, basicHeader } from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import { ALICE, BOB, startByCallerGateway } from "../pacing/support/by-caller-gateway.js";
import { upstreamStatus } from "../pacing/support/gateway.js";
import {
  closeAll,
  type Handshake,
  type HandshakeOptions,
  handshake,
  type LimitedWsUpstream,
  startLimitedWsUpstream,
} from "../pacing/support/websocket.js";

/**
 * WebSocket handshakes spend the budget of their caller under `rateLimit.by: caller`, as plain
 * requests do: a heavy caller's burst of handshakes queues behind its own limit while a light
 * caller's handshake to the same upstream opens at once, and a second handshake of the heavy
 * caller waits behind its burst. Callers are the peer address (127.0.0.1 and 127.0.0.2), or the
 * user an `allow` list identified (both from 127.0.0.1).
 */

/** The heavy caller's burst: 2 per second (one every 510 ms), so the last waits ~2.5 s. */
const HEAVY = 6;

describe("WebSocket handshakes with rateLimit.by: caller", () => {
  let emulator: Emulator;
  let upstream: LimitedWsUpstream;
  let gateway: AppUnderTest;
  const wsUrl = (path: string) => `${gateway.url.replace("http:", "ws:")}${path}`;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    // Plenty for every caller: this file is about who waits, not the upstream's limit.
    upstream = await startLimitedWsUpstream({ cert: pki.good, limit: 1_000 });
    gateway = await startByCallerGateway({
      caPem: pki.caPem,
      emulator,
      origin: upstream.origin,
      perCaller: { requests: 2, per: "1s", by: "caller", wait: "30s" },
    });
  }, 30_000);

  afterAll(async () => {
    await gateway?.close();
    await Promise.all([upstream?.close(), emulator?.close()]);
  });

  /**
   * The heavy caller opens HEAVY handshakes at once; once they queue, the light caller and the
   * heavy caller open one more each. Returns the answers in the order they arrived.
   */
  async function heavyAndLight(name: string, heavy: HandshakeOptions, light: HandshakeOptions) {
    const arrived: { who: "heavy" | "light" | "heavy-again"; answer: Handshake }[] = [];
    const track = (who: (typeof arrived)[number]["who"], path: string, options: HandshakeOptions) =>
      handshake(wsUrl(`/${name}/${path}`), options).then((answer) => {
        arrived.push({ who, answer });
        return answer;
      });
    const burst = Array.from({ length: HEAVY }, (_, i) => track("heavy", `heavy-${i}`, heavy));
    // Most of the burst waits for its turn (one goes every 510 ms).
    await waitFor(
      async () => Number((await upstreamStatus(gateway.adminUrl, name)).rateLimit?.queued) >= 3,
      "the heavy burst queued",
    );
    const [lightAnswer, again] = await Promise.all([
      track("light", "light", light),
      track("heavy-again", "heavy-again", heavy),
    ]);
    const heavyAnswers = await Promise.all(burst);
    closeAll([...heavyAnswers, lightAnswer, again]);
    const order = arrived.map((a) => a.who);
    console.log(`${name}: ${order.join(" ")}`);
    return { order, statuses: arrived.map((a) => a.answer.status) };
  }

  function lightLine(name: string) {
    return accessLines(gateway.records).find((line) => line.path === `/${name}/light`);
  }

  it("by peer address: the light caller's handshake opens at once while the heavy one queues", async () => {
    const { order, statuses } = await heavyAndLight(
      "by-address",
      { localAddress: "127.0.0.1" },
      { localAddress: "127.0.0.2" },
    );
    expect(statuses).toEqual(Array(HEAVY + 2).fill(101));
    // The light caller overtook most of the burst; the heavy caller's next one came last.
    expect(order.indexOf("light")).toBeLessThanOrEqual(HEAVY - 3);
    expect(order.at(-1)).toBe("heavy-again");
    await waitFor(() => lightLine("by-address") !== undefined, "the light caller's access line");
    // Its budget was untouched: it did not wait at all.
    expect(lightLine("by-address")?.waitMs).toBeUndefined();
  }, 30_000);

  it("by identified caller: two users from one address have a budget each", async () => {
    const { order, statuses } = await heavyAndLight(
      "by-user",
      { headers: { "proxy-authorization": basicHeader(ALICE.user, ALICE.password) } },
      { headers: { "proxy-authorization": basicHeader(BOB.user, BOB.password) } },
    );
    expect(statuses).toEqual(Array(HEAVY + 2).fill(101));
    expect(order.indexOf("light")).toBeLessThanOrEqual(HEAVY - 3);
    expect(order.at(-1)).toBe("heavy-again");
    await waitFor(() => lightLine("by-user") !== undefined, "the light caller's access line");
    expect(lightLine("by-user")).toMatchObject({ caller: "user:bob" });
    expect(lightLine("by-user")?.waitMs).toBeUndefined();
  }, 30_000);
});
