import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { runWait, summarizeReadyz } from "../../src/commands/wait.js";

const NOT_READY = JSON.stringify({
  status: "not_ready",
  upstreams: [
    { name: "files", ready: true, state: "valid", reason: "token valid" },
    {
      name: "scripts",
      ready: false,
      state: "failed",
      reason: "no usable token: token fetch failing",
      lastError: { code: "BP_ERR_TOKEN_REJECTED", message: "answered 401 (invalid_client)" },
    },
  ],
});

function capture(): { stream: PassThrough; text: () => string } {
  const stream = new PassThrough();
  const chunks: Buffer[] = [];
  stream.on("data", (chunk: Buffer) => chunks.push(chunk));
  return { stream, text: () => Buffer.concat(chunks).toString("utf8") };
}

describe("bearer-proxy wait", () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  });

  /** A fake admin listener whose /readyz turns 200 on the `readyAfter`-th poll (never if 0). */
  async function startAdmin(
    readyAfter: number,
  ): Promise<{ url: string; polls: () => number; paths: string[] }> {
    let polls = 0;
    const paths: string[] = [];
    server = createServer((req, res) => {
      paths.push(req.url ?? "");
      polls += 1;
      const ready = readyAfter > 0 && polls >= readyAfter;
      res.writeHead(ready ? 200 : 503, { "content-type": "application/json" });
      res.end(ready ? '{"status":"ready","upstreams":[]}' : NOT_READY);
    });
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, polls: () => polls, paths };
  }

  it("exits 0 as soon as /readyz answers 200", async () => {
    const admin = await startAdmin(4);
    const stderr = capture();
    const code = await runWait({
      adminUrl: admin.url,
      timeoutMs: 5_000,
      intervalMs: 10,
      stderr: stderr.stream,
    });
    expect(code).toBe(0);
    expect(admin.polls()).toBe(4);
    expect(admin.paths).toEqual(["/readyz", "/readyz", "/readyz", "/readyz"]);
    expect(stderr.text()).toBe("");
  });

  it("exits 1 on timeout and names the last status and the not-ready upstream", async () => {
    const admin = await startAdmin(0);
    const stderr = capture();
    const started = performance.now();
    const code = await runWait({
      adminUrl: `${admin.url}/`,
      timeoutMs: 1_000,
      intervalMs: 20,
      stderr: stderr.stream,
    });
    const elapsedMs = performance.now() - started;
    expect(code).toBe(1);
    // A poll every 20 ms for 1 s: ~30 when idle, and a loaded machine's stalls still leave
    // more than 2; a wait that gave up after its first answer polls once.
    expect(admin.polls()).toBeGreaterThan(2);
    expect(elapsedMs).toBeGreaterThanOrEqual(990);
    expect(elapsedMs).toBeLessThan(4_000);
    expect(stderr.text()).toBe(
      `bearer-proxy wait: ${admin.url}/readyz not ready after 1s; last answer: 503 not_ready; upstream scripts failed: no usable token: token fetch failing (BP_ERR_TOKEN_REJECTED: answered 401 (invalid_client))\n`,
    );
  });

  it("keeps polling while nothing listens yet, and reports the connection error on timeout", async () => {
    // Take a free port, then release it so connections are refused.
    const admin = await startAdmin(0);
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    server = undefined;
    const stderr = capture();
    const started = performance.now();
    // 1 s: a refused connect that a loaded machine holds up for a while still answers within it.
    const code = await runWait({
      adminUrl: admin.url,
      timeoutMs: 1_000,
      intervalMs: 20,
      stderr: stderr.stream,
    });
    expect(code).toBe(1);
    // It kept polling to the deadline rather than giving up on the first refusal.
    expect(performance.now() - started).toBeGreaterThanOrEqual(990);
    expect(stderr.text()).toMatch(/not ready after 1s; last answer: .*ECONNREFUSED/);
  });

  it("does not hang on an admin port that accepts but never answers", async () => {
    server = createServer(() => {});
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const stderr = capture();
    const started = performance.now();
    const code = await runWait({
      adminUrl: `http://127.0.0.1:${port}`,
      timeoutMs: 1_000,
      stderr: stderr.stream,
    });
    const elapsedMs = performance.now() - started;
    expect(code).toBe(1);
    // The hung poll is cut at the deadline: ~1 s, where a poll without a bound never returns.
    expect(elapsedMs).toBeGreaterThanOrEqual(990);
    expect(elapsedMs).toBeLessThan(4_000);
    const answer = /last answer: no answer within (\d+) ms\n$/.exec(stderr.text());
    expect(answer, stderr.text()).not.toBeNull();
    // A poll's bound is what is left of the timeout, never the 2 s per-poll cap (a poll cut by a
    // timer that fired a hair early leaves a last one of ~0 ms).
    expect(Number(answer![1])).toBeLessThanOrEqual(1_000);
  });

  it("rejects an admin URL that is not http", async () => {
    const stderr = capture();
    expect(
      await runWait({ adminUrl: "127.0.0.1:9901", timeoutMs: 100, stderr: stderr.stream }),
    ).toBe(1);
    expect(stderr.text()).toContain("--admin must be an http:// URL");
  });

  it("summarises non-JSON bodies verbatim", () => {
    expect(summarizeReadyz("upstream connect error")).toBe("upstream connect error");
    expect(summarizeReadyz('{"status":"draining"}')).toBe("draining");
  });
});
