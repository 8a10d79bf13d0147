import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { Agent, request } from "undici";
import { describe, expect, it } from "vitest";
import { startEmulator } from "../../src/emulator/emulator.js";
import { fetchEmulatorToken, undiciAgentFor } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";

describe("emulator lifecycle", () => {
  it("writes its CA to a temp file it removes on close", async () => {
    const emulator = await startEmulator({ port: 0 });
    try {
      expect(emulator.url).toBe(`https://127.0.0.1:${emulator.port}`);
      expect(readFileSync(emulator.caFile, "utf8")).toBe(emulator.caPem);
      expect(emulator.caPem).toMatch(/^-----BEGIN CERTIFICATE-----/);
    } finally {
      await emulator.close();
    }
    expect(existsSync(emulator.caFile)).toBe(false);
  });

  it("writes the CA to a given caFile and keeps it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "emulator-test-"));
    const caFile = join(dir, "ca.pem");
    const emulator = await startEmulator({ port: 0, caFile });
    await emulator.close();
    expect(readFileSync(caFile, "utf8")).toBe(emulator.caPem);
    rmSync(dir, { recursive: true });
  });

  it("closes fast although a client holds a keep-alive connection", async () => {
    const emulator = await startEmulator({ port: 0 });
    const agent = undiciAgentFor(emulator, { keepAliveTimeout: 60_000 });
    await fetchEmulatorToken(emulator, agent);
    const started = performance.now();
    await emulator.close();
    expect(performance.now() - started).toBeLessThan(1000);
    await emulator.close(); // idempotent
    await agent.close();
  });

  it("closes fast with a half-open TLS connection and an upload in flight", async () => {
    const emulator = await startEmulator({ port: 0 });
    const agent = undiciAgentFor(emulator);
    const token = await fetchEmulatorToken(emulator, agent);
    const upload = request(`${emulator.url}/echo/slow`, {
      method: "POST",
      dispatcher: agent,
      headers: { authorization: `Bearer ${token}` },
      body: Readable.from(
        (async function* () {
          yield Buffer.alloc(1024);
          await new Promise((resolve) => setTimeout(resolve, 10_000));
        })(),
      ),
    }).catch((error: Error) => error);
    const { connect } = await import("node:net");
    const halfOpen = connect(emulator.port, "127.0.0.1");
    halfOpen.on("error", () => {});
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = performance.now();
    await emulator.close();
    expect(performance.now() - started).toBeLessThan(1000);
    expect(await upload).toBeInstanceOf(Error);
    halfOpen.destroy();
    await agent.destroy();
  });

  it("serves a given certificate and rejects a port in use", async () => {
    const pki = await createTestPki();
    const emulator = await startEmulator({ port: 0, tls: { ...pki.good, caPem: pki.caPem } });
    try {
      expect(emulator.caPem).toBe(pki.caPem);
      const agent = new Agent({ connect: { ca: pki.caPem } });
      await fetchEmulatorToken(emulator, agent);
      await agent.close();
      await expect(startEmulator({ port: emulator.port })).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await emulator.close();
    }
  });

  it("refuses bad options", async () => {
    await expect(startEmulator({ port: 0, tokenLifetimeSeconds: 0 })).rejects.toThrow(RangeError);
    await expect(
      startEmulator({ port: 0, clients: [{ clientId: "", clientSecret: "x" }] }),
    ).rejects.toThrow(TypeError);
  });

  it("uses the configured scope", async () => {
    const emulator = await startEmulator({ port: 0, scope: "sheets:read" });
    const agent = undiciAgentFor(emulator);
    try {
      const response = await request(`${emulator.url}/iam/v1/oauth2/token`, {
        method: "POST",
        dispatcher: agent,
        headers: { "content-type": "application/json" },
        body: '{"grant_type":"client_credentials","client_id":"demo-client","client_secret":"demo-secret","scope":"files:read"}',
      });
      expect(response.statusCode).toBe(400);
      await response.body.dump();
    } finally {
      await agent.close();
      await emulator.close();
    }
  });
});
