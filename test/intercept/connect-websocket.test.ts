/**
 * Issue 34: a WebSocket over `wss://` through a terminated CONNECT — the `ws` client tunnels,
 * trusts the interception CA, and upgrades inside. The upgrade takes the same way as any
 * WebSocket through the proxy (the token and X-Version on the handshake, the client's own
 * Authorization replaced, messages relayed both ways, one access line), marked `via: connect`;
 * when both sides are done the proxy holds no connection.
 */
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { accessLines } from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import { headerValues, startWsUpstream, type WsUpstream } from "../protocol/ws-upstream.js";
import { interceptBlock, interceptedUpstream, sendConnect } from "./support/connect-client.js";

const files = useCaFiles("bp-connect-ws-");
let ca: CaFiles;
let emulator: Emulator;
let upstream: WsUpstream;
let gateway: AppUnderTest;
/** `localhost:<port>` of the WebSocket server: what the client's CONNECT names. */
let authority: string;

beforeAll(async () => {
  const pki = await createTestPki();
  ca = await files.writeCa("ec-p256");
  emulator = await startTlsEmulator(pki, { host: "localhost" });
  upstream = await startWsUpstream({ cert: pki.good });
  authority = `localhost:${new URL(upstream.origin).port}`;
  gateway = await startAppUnderTest({
    caPem: pki.caPem,
    config: {
      intercept: interceptBlock(ca),
      upstreams: [
        interceptedUpstream("live", `https://${authority}`, {
          apiVersion: "scripting-preview",
          tokenUrl: `${emulator.url}/oauth2/token`,
        }),
      ],
    },
  });
}, 30_000);
afterAll(async () => {
  await gateway?.close();
  await upstream?.close();
  await emulator?.close();
});

const proxyConnections = () =>
  new Promise<number>((resolve, reject) =>
    gateway.app.proxies[0]!.server.getConnections((err, count) =>
      err ? reject(err) : resolve(count),
    ),
  );

describe("wss:// through a terminated CONNECT", () => {
  it("upgrades inside the tunnel with the token injected, relays messages, and cleans up", async () => {
    const tunnel = await sendConnect(gateway.url, authority);
    expect(tunnel.status).toBe(200);
    const ws = new WebSocket(`wss://${authority}/chat?room=7`, {
      headers: { authorization: "Bearer the-clients-own-token" },
      perMessageDeflate: false,
      // The tunnel is the connection: TLS to the proxy's leaf, trusting the interception CA.
      createConnection: () =>
        tlsConnect({ socket: tunnel.socket, servername: "localhost", ca: ca.certPem }),
    });
    await new Promise<void>((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
      ws.on("unexpected-response", (_req, res) => reject(new Error(`status ${res.statusCode}`)));
    });
    const handshake = upstream.handshakes.at(-1)!;
    expect(handshake.url).toBe("/chat?room=7");
    const authorization = headerValues(handshake.headers, "authorization");
    expect(authorization).toHaveLength(1);
    expect(authorization[0]).toMatch(/^Bearer \S+$/);
    expect(authorization[0]).not.toBe("Bearer the-clients-own-token");
    expect(headerValues(handshake.headers, "x-version")).toEqual([SCRIPTING_PREVIEW_HEADER]);

    const echoed = new Promise<string>((resolve) =>
      ws.once("message", (data: Buffer) => resolve(data.toString())),
    );
    ws.send("through the intercepted tunnel");
    expect(await echoed).toBe("through the intercepted tunnel");

    const closed = new Promise<number>((resolve) => ws.once("close", resolve));
    ws.close(1000, "done");
    expect(await closed).toBe(1000);
    await waitFor(() => upstream.closes.length === 1, "the server's close");
    expect(upstream.closes[0]).toEqual({ code: 1000, reason: "done" });

    await waitFor(
      () => accessLines(gateway.records).some((l) => l.path === "/chat"),
      "the upgrade's access line",
    );
    expect(accessLines(gateway.records).find((l) => l.path === "/chat")).toMatchObject({
      upstream: "live",
      method: "GET",
      status: 101,
      via: "connect",
    });
    await waitFor(async () => (await proxyConnections()) === 0, "the tunnel closed at the proxy");
    await waitFor(() => upstream.openSockets() === 0, "the upstream connection closed");
  });
});
