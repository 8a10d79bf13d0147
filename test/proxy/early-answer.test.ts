import { Readable } from "node:stream";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { createTestPki } from "../helpers/tls.js";
import { startTestProxy, type TestProxy } from "./harness.js";
import { createStubTokens } from "./stub-tokens.js";

/**
 * The early-answer pathology (issue 8): an upstream that answers a POST before reading its body
 * makes undici drop the connection if the body is still being written — a TLS handshake per
 * request. Bodies up to replayBodyLimit are buffered and dispatched whole, so the connection is
 * kept. Streamed (chunked) bodies show the pathology for comparison.
 */
describe("an upstream answering before reading a 64 KiB body", () => {
  let upstream: FakeUpstream;
  let proxy: TestProxy;
  const client = new Agent({ connections: 1 });
  const body = Buffer.alloc(64 * 1024, 1);
  const ROUNDS = 100;

  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startFakeUpstream({ cert: pki.good });
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { u: createStubTokens() },
      logLevel: "warn",
      config: { upstreams: [{ name: "u", baseUrl: upstream.origin }] },
    });
  });
  afterAll(async () => {
    await client.close();
    await proxy.close();
    await upstream.close();
  });

  async function loop(makeBody: () => Buffer | Readable) {
    const handshakesBefore = upstream.tlsHandshakes();
    const startedMs = performance.now();
    for (let i = 0; i < ROUNDS; i++) {
      const response = await request(`${proxy.url}/early-answer`, {
        method: "POST",
        body: makeBody(),
        dispatcher: client,
      });
      expect(response.statusCode).toBe(413);
      await response.body.text();
    }
    const seconds = (performance.now() - startedMs) / 1000;
    return { handshakes: upstream.tlsHandshakes() - handshakesBefore, perSecond: ROUNDS / seconds };
  }

  it("buffered bodies (Content-Length ≤ replayBodyLimit) keep the upstream connection", async () => {
    const buffered = await loop(() => body);
    const streamed = await loop(() =>
      Readable.from([body.subarray(0, 32 * 1024), body.subarray(32 * 1024)]),
    );
    console.log(
      `early answer, ${ROUNDS} × 64 KiB POST: buffered ${buffered.handshakes} TLS handshakes (${buffered.perSecond.toFixed(0)} req/s); ` +
        `streamed/chunked ${streamed.handshakes} handshakes (${streamed.perSecond.toFixed(0)} req/s)`,
    );
    expect(buffered.handshakes).toBeLessThanOrEqual(2);
    // The comparison proves the test can see the pathology at all.
    expect(streamed.handshakes).toBeGreaterThanOrEqual(ROUNDS / 4);
  }, 60_000);
});
