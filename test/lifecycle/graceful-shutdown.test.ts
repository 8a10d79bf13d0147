import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import {
  emulatorConfigYaml,
  httpCall,
  logRecords,
  pollUntil,
  useCliProcesses,
  useTempDir,
  waitUntilReady,
} from "../cli/helpers.js";
import { useEmulator } from "../helpers/emulator.js";

interface SlowUpload {
  /** Send the last chunk and end the body. */
  finish(): void;
  /** Bytes written so far and their sha256. */
  sent(): { bytes: number; sha256: string };
  /** The response (or the error that ended the exchange) and when it arrived. */
  outcome: Promise<
    | { ok: true; status: number; headers: Record<string, unknown>; body: string; atMs: number }
    | { ok: false; error: string; atMs: number }
  >;
}

/** A POST whose body trickles in, 1 KiB every 100 ms, until `finish()`: a slow in-flight request. */
function startSlowUpload(url: string): SlowUpload {
  const hash = createHash("sha256");
  let bytes = 0;
  const chunk = Buffer.alloc(1024, "s");
  const req = httpRequest(url, {
    method: "POST",
    agent: false,
    headers: { "content-type": "application/octet-stream" },
  });
  const write = () => {
    hash.update(chunk);
    bytes += chunk.length;
    req.write(chunk);
  };
  write();
  const timer = setInterval(write, 100);
  const outcome: SlowUpload["outcome"] = new Promise((resolve) => {
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({
          ok: true,
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString(),
          atMs: performance.now(),
        }),
      );
      res.on("error", (e) => resolve({ ok: false, error: e.message, atMs: performance.now() }));
    });
    req.on("error", (e) => {
      clearInterval(timer);
      resolve({
        ok: false,
        error: (e as NodeJS.ErrnoException).code ?? e.message,
        atMs: performance.now(),
      });
    });
  });
  let digest: string | undefined;
  return {
    finish() {
      clearInterval(timer);
      digest = hash.copy().digest("hex");
      req.end();
    },
    sent: () => ({ bytes, sha256: digest ?? hash.copy().digest("hex") }),
    outcome,
  };
}

/** Whether a new TCP connection to the URL's port is refused (the listener is closed). */
function refused(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (e: NodeJS.ErrnoException) => resolve(e.code === "ECONNREFUSED"));
  });
}

describe("graceful shutdown of bearer-proxy run (drainDelay 3s, timeout 3s)", () => {
  const emulator = useEmulator();
  const cli = useCliProcesses();
  const dir = useTempDir("bp-lifecycle-");

  it("fails readiness at once, serves through the drain, lets in-flight requests finish, exits 0", async () => {
    const file = join(dir(), "drain.yaml");
    writeFileSync(file, emulatorConfigYaml(emulator(), { drainDelay: "3s", timeout: "3s" }));
    const proc = cli.start(["run", "--config", file]);
    const { proxyUrl, adminUrl } = await proc.ports();
    await waitUntilReady(adminUrl);

    // Two uploads in flight: one we finish after the listener has closed (it must succeed), one
    // we never finish (the 3 s timeout must cut it, and the process must still exit 0).
    const finishing = startSlowUpload(`${proxyUrl}/echo/finishing`);
    const endless = startSlowUpload(`${proxyUrl}/echo/endless`);
    await sleep(150);

    const signalAtMs = performance.now();
    proc.child.kill("SIGTERM");

    // Readiness fails at once: well before the 3 s drain ends (a proxy that failed it only with
    // the listener would answer 503 at 3 s).
    await pollUntil(
      async () => (await httpCall(`${adminUrl}/readyz`)).status === 503,
      2_000,
      "/readyz 503 after SIGTERM",
      10,
    );
    const readyz = await httpCall(`${adminUrl}/readyz`);
    expect(readyz.status).toBe(503);
    expect(JSON.parse(readyz.body)).toMatchObject({ status: "draining" });

    // New requests are still proxied during the drain delay, on a fresh connection: answered
    // less than the 3 s drain after the signal, which the child saw no earlier than we sent it.
    const during = await httpCall(`${proxyUrl}/platform/v1/spreadsheets/draining`);
    expect(performance.now() - signalAtMs).toBeLessThan(3_000);
    expect(during.status).toBe(200);
    expect(JSON.parse(during.body)).toMatchObject({ id: "draining" });

    // Then the listener closes, not before the drain delay has passed.
    await pollUntil(() => refused(proxyUrl), 8_000, "proxy listener closed", 20);
    const closedAtMs = performance.now();
    expect(closedAtMs - signalAtMs).toBeGreaterThanOrEqual(2_950);
    expect(proc.child.exitCode).toBeNull();

    // The request that was in flight completes after the listener closed.
    finishing.finish();
    const done = await finishing.outcome;
    expect(done).toMatchObject({ ok: true, status: 200 });
    if (!done.ok) return;
    expect(done.atMs).toBeGreaterThan(closedAtMs);
    // It went through whole: the upstream saw every byte.
    expect(JSON.parse(done.body)).toMatchObject({
      method: "POST",
      url: "/echo/finishing",
      bodyLength: finishing.sent().bytes,
      bodySha256: finishing.sent().sha256,
    });
    // A draining proxy tells keep-alive clients to go elsewhere.
    expect(done.headers.connection).toBe("close");

    // The never-ending upload is cut when shutdown.timeout runs out, and the process exits 0.
    const { code, signal, atMs: exitedAtMs } = await proc.exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    const cut = await endless.outcome;
    endless.finish();
    expect(cut.ok && cut.status === 200).toBe(false);
    // drainDelay 3 s + timeout 3 s: not before, and not much after.
    expect(exitedAtMs - signalAtMs).toBeGreaterThanOrEqual(5_900);
    expect(exitedAtMs - signalAtMs).toBeLessThan(12_000);

    const messages = logRecords(proc.stdout()).map((r) => r.msg);
    expect(messages).toContain("shutting down: readiness now fails, draining");
    expect(messages).toContain("stopped");
    expect(logRecords(proc.stdout()).find((r) => r.reason === "SIGTERM")).toMatchObject({
      drainDelayMs: 3000,
      timeoutMs: 3000,
    });
  });
});
