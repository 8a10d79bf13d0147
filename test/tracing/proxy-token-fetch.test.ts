/**
 * Issue #25: the token fetch a request waited on is in that request's trace (child of its
 * "token wait"), and a fetch the request did not start — a prefetch or a refresh — is a trace of
 * its own that the wait links to.
 */
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/index.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { startTracedProxy } from "./proxy-fixture.js";

describe("token fetch spans", () => {
  let pki: TestPki;
  let emulator: Emulator;

  beforeAll(async () => {
    pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
  });
  afterAll(() => emulator.close());

  it("a fetch the first request of a lazy credential waits on joins its trace", async () => {
    const proxy = await startTracedProxy({
      caPem: pki.caPem,
      upstreams: [{ name: "lazy", baseUrl: emulator.url, token: { prefetch: false } }],
    });
    try {
      const response = await request(`${proxy.url}/echo`);
      expect(response.statusCode).toBe(200);
      await response.body.text();
      const spans = await proxy.flushed();
      const server = spans.find((s) => s.kind === "server")!;
      const wait = spans.find((s) => s.name === "token wait")!;
      const fetch = spans.find((s) => s.name === "token fetch")!;
      expect(wait.traceId).toBe(server.traceId);
      expect(wait.parentSpanId).toBe(server.spanId);
      expect(fetch.traceId).toBe(server.traceId);
      expect(fetch.parentSpanId).toBe(wait.spanId);
      expect(JSON.stringify(fetch.attributes)).not.toContain("demo-secret");
    } finally {
      await proxy.close();
    }
  });
});
