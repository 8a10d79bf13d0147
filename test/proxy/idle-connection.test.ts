import { setTimeout as sleep } from "node:timers/promises";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { startTestProxy, type TestProxy } from "./harness.js";
import { createStubTokens } from "./stub-tokens.js";

/**
 * `timeouts.idleConnection`: how long an unused upstream connection is kept when the upstream
 * announces no limit of its own. Past it the next request pays a new TLS handshake; within it
 * the pooled connection is reused.
 */
describe("upstream idle connection timeout", () => {
  let pki: TestPki;
  let upstream: FakeUpstream;
  const proxies: TestProxy[] = [];

  beforeAll(async () => {
    pki = await createTestPki();
    // keepAliveTimeout 0: the server sends no `Keep-Alive: timeout=N` hint and never closes idle
    // connections itself, so only the proxy's setting decides.
    upstream = await startFakeUpstream({ cert: pki.good, keepAliveTimeoutMs: 0 });
  });
  afterAll(async () => {
    for (const proxy of proxies) await proxy.close();
    await upstream.close();
  });

  async function handshakesAcrossAPause(idleConnection: string): Promise<number> {
    const proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { u: createStubTokens() },
      logLevel: "warn",
      config: {
        upstreams: [{ name: "u", baseUrl: upstream.origin, timeouts: { idleConnection } }],
      },
    });
    proxies.push(proxy);
    const before = upstream.tlsHandshakes();
    for (const pause of [0, 700]) {
      await sleep(pause);
      const response = await request(`${proxy.url}/echo`);
      expect(response.statusCode).toBe(200);
      await response.body.dump();
    }
    return upstream.tlsHandshakes() - before;
  }

  it("closes an idle connection after a short setting: the next request reconnects", async () => {
    expect(await handshakesAcrossAPause("250ms")).toBe(2);
  });

  it("keeps it across the pause with a longer setting: one handshake for both requests", async () => {
    expect(await handshakesAcrossAPause("30s")).toBe(1);
  });
});
