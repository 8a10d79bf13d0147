/**
 * Issue 34 and reload: which upstreams are intercepted changes live (the CA itself needs a
 * restart). A reload that drops `intercept: true` refuses new CONNECTs to that authority and
 * leaves its open tunnels nowhere to go: their next request gets 403 `host_not_allowed` and the
 * connection closes. An upstream newly marked is terminated at once, its leaf made on demand.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, loadTestConfig, startAppUnderTest } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import {
  interceptBlock,
  interceptedUpstream,
  requestOver,
  sendConnect,
  tlsThrough,
} from "./support/connect-client.js";

const files = useCaFiles("bp-connect-reload-");
let pki: TestPki;
let ca: CaFiles;
let emulator: Emulator;
let other: FakeUpstream;
let gateway: AppUnderTest;
let first: string;
let second: string;

const documentWith = (intercepted: { first: boolean; second: boolean }) => ({
  intercept: interceptBlock(ca),
  upstreams: [
    interceptedUpstream("first", emulator.url, { intercept: intercepted.first }),
    interceptedUpstream("second", `https://${second}`, {
      intercept: intercepted.second,
      tokenUrl: `${emulator.url}/iam/v1/oauth2/token`,
    }),
  ],
});

beforeAll(async () => {
  pki = await createTestPki();
  ca = await files.writeCa("ec-p256");
  emulator = await startTlsEmulator(pki, { host: "localhost" });
  other = await startFakeUpstream({ cert: pki.good });
  first = new URL(emulator.url).host;
  second = `localhost:${other.port}`;
  gateway = await startAppUnderTest({
    caPem: pki.caPem,
    config: documentWith({ first: true, second: false }),
  });
}, 30_000);
afterAll(async () => {
  await gateway?.close();
  await other?.close();
  await emulator?.close();
});

describe("reloading which upstreams are intercepted", () => {
  it("drops a tunnel whose upstream is no longer intercepted, and terminates a newly marked one", async () => {
    const tunnel = await sendConnect(gateway.url, first);
    const tls = await tlsThrough(tunnel.socket, { host: "localhost", ca: ca.certPem });
    expect((await requestOver(tls, first, "/echo/before")).status).toBe(200);
    expect((await sendConnect(gateway.url, second)).status).toBe(403);

    const next = await loadTestConfig({
      caPem: pki.caPem,
      config: documentWith({ first: false, second: true }),
    });
    try {
      expect(await gateway.app.reload(next.config)).toMatchObject({ outcome: "applied" });
    } finally {
      next.cleanup();
    }

    const closed = new Promise<void>((resolve) => tls.once("close", () => resolve()));
    const after = await requestOver(tls, first, "/echo/after");
    expect(after.status).toBe(403);
    expect(after.headers["bearer-proxy-error"]).toBe("host_not_allowed");
    expect(JSON.parse(after.text).error.message).toContain(`${first} is no longer intercepted`);
    await closed;
    expect((await sendConnect(gateway.url, first)).status).toBe(403);

    const marked = await sendConnect(gateway.url, second);
    expect(marked.status).toBe(200);
    const inside = await tlsThrough(marked.socket, { host: "localhost", ca: ca.certPem });
    try {
      const answer = await requestOver(inside, second, "/echo/newly-intercepted");
      expect(answer.status).toBe(200);
      expect(other.requests.at(-1)?.url).toBe("/echo/newly-intercepted");
    } finally {
      inside.destroy();
    }
  });
});
