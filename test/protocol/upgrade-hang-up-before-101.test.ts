import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TokenProvider } from "../../src/token/token-provider.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki } from "../helpers/tls.js";
import { sleep, waitFor } from "../helpers/wait.js";
import { requestLogs, startTestProxy, type TestProxy } from "../proxy/harness.js";
import { createStubTokens } from "../proxy/stub-tokens.js";
import { HANDSHAKE, startWsUpstream, type WsUpstream } from "./ws-upstream.js";

/**
 * Node stops reading a connection it hands to the `upgrade` event, so a client that hung up
 * while its handshake waited (for a token, a turn from the pacer, the upstream's answer) went
 * unseen until the 101: the wait kept its place and its `maxUpgrades` slot, and the handshake
 * was sent upstream for nobody. The upgrade handler now reads the connection until the 101: a
 * hang-up ends the wait, and bytes the client sent early still reach the upstream, in order.
 */

/** Tokens that come only once `release()` is called; an aborted wait rejects at once. */
function heldTokens(): TokenProvider & { release(): void; waiting: number } {
  const stub = createStubTokens("held-token");
  stub.coldPeek = true;
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tokens = {
    ...stub,
    waiting: 0,
    release,
    getToken: (signal?: AbortSignal) =>
      new Promise<Awaited<ReturnType<TokenProvider["getToken"]>>>((resolve, reject) => {
        tokens.waiting++;
        const done = () => tokens.waiting--;
        void released.then(() => {
          if (signal?.aborted) return;
          done();
          resolve(stub.getToken());
        });
        signal?.addEventListener(
          "abort",
          () => {
            done();
            reject(signal.reason);
          },
          { once: true },
        );
      }),
  };
  return tokens;
}

/** A client's (masked, RFC 6455 §5.3) text frame. */
function maskedTextFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const mask = Buffer.from([1, 2, 3, 4]);
  const masked = payload.map((byte, i) => byte ^ mask[i % 4]!);
  return Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]);
}

describe("a client that hangs up before its 101", () => {
  let upstream: WsUpstream;
  let proxy: TestProxy;
  const tokens = heldTokens();

  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startWsUpstream({ cert: pki.good });
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { ws: tokens },
      config: { upstreams: [{ name: "ws", baseUrl: upstream.origin, match: { pathPrefix: "/" } }] },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  it("ends the wait for the token: nothing is sent upstream, the slot is free", async () => {
    await rawRequest(proxy.port, `GET /gone HTTP/1.1\r\n${HANDSHAKE}`, {
      endAfterWrite: true,
      timeoutMs: 100,
    });
    await waitFor(
      () => requestLogs(proxy).some((line) => line.path === "/gone"),
      "the hang-up's access line",
    );
    // The token is still held: the hang-up ended the wait.
    expect(requestLogs(proxy).find((line) => line.path === "/gone")).toMatchObject({
      status: 499,
      errorCode: "client_closed",
    });
    expect(tokens.waiting).toBe(0);
    expect(proxy.lifecycle.upgrades.inFlight).toBe(0);
    expect(upstream.handshakes).toHaveLength(0);
  });

  it("keeps what the client sent ahead of the 101 for the upstream", async () => {
    // The frame arrives while the handshake waits for its token; the upstream echoes it.
    const answer = rawRequest(proxy.port, "", {
      parts: [`GET /early HTTP/1.1\r\n${HANDSHAKE}`, maskedTextFrame("early")],
      pauseMs: 50,
      timeoutMs: 15_000,
      // The 101 stays open: done once the echoed frame is back, and 300 ms more to see that it
      // comes only once.
      until: (_responses, text) => text.includes("\x81\x05early"),
      afterUntilMs: 300,
    });
    await sleep(300);
    tokens.release();
    const exchange = await answer;
    expect(exchange.responses[0]?.status).toBe(101);
    expect(upstream.handshakes).toHaveLength(1);
    const afterHead = exchange.text.slice(exchange.text.indexOf("\r\n\r\n") + 4);
    expect(afterHead).toBe("\x81\x05early");
  });
});
