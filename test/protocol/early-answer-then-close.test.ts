import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ProxiedRawUpstream, startProxiedRawUpstream } from "./support/proxy-to.js";

const run = promisify(execFile);

/**
 * Issue 15 item 3: an 8 MiB upload (streamed: over replayBodyLimit) to an upstream that answers
 * 401/411/413 at once, without reading the body, and closes. The client must get that answer
 * every time — never a 502 `upstream_reset` — on a connection the proxy then closes (the rest
 * of the client's body was never read).
 *
 * Two ways to close: `reset` closes with the body unread, so the kernel sends a RST straight
 * away (before the fix: a 502 nearly every time); `fin` ends first and closes once the answer
 * is flushed, as Node's own server does with `Connection: close`.
 */

const MIB = 1024 * 1024;
const UNDICI_TRIES = 200;
/** curl needs 0.35–0.6 s per upload on a loaded 2-core machine: fewer tries keep the file short. */
const CURL_TRIES = 60;
const STATUSES = [401, 411, 413] as const;
const CLOSES = ["reset", "fin"] as const;
const REASONS: Record<number, string> = {
  401: "Unauthorized",
  411: "Length Required",
  413: "Content Too Large",
};

describe("an early answer followed by an immediate close", () => {
  let setup: ProxiedRawUpstream;
  let dir: string;
  let bodyFile: string;
  const body = Buffer.alloc(8 * MIB, "u");

  beforeAll(async () => {
    setup = await startProxiedRawUpstream(({ head, socket }) => {
      const [, status, close] = /^PUT \/(\d+)\/(\w+)/.exec(head) ?? [];
      const answer = JSON.stringify({ error: REASONS[Number(status)] });
      socket.write(
        `HTTP/1.1 ${status} ${REASONS[Number(status)]}\r\ncontent-type: application/json\r\n` +
          `content-length: ${answer.length}\r\nconnection: close\r\n\r\n${answer}`,
      );
      if (close === "reset") socket.destroy();
      else socket.end(() => socket.destroy());
      return new Promise<void>(() => {});
    });
    dir = mkdtempSync(join(tmpdir(), "bp-early-close-"));
    bodyFile = join(dir, "upload.bin");
    writeFileSync(bodyFile, body);
  });
  afterAll(async () => {
    await setup.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function tally(results: { expected: number; got: string }[]) {
    const counts = new Map<string, number>();
    for (const r of results) counts.set(r.got, (counts.get(r.got) ?? 0) + 1);
    return Object.fromEntries(counts);
  }

  it(`undici, ${UNDICI_TRIES} tries: the upstream's answer every time, 0 × 502`, async () => {
    const results: { expected: number; got: string }[] = [];
    const started = performance.now();
    const client = new Agent({ connections: 1 });
    try {
      for (let i = 0; i < UNDICI_TRIES; i++) {
        const status = STATUSES[i % STATUSES.length]!;
        const close = CLOSES[Math.floor(i / STATUSES.length) % CLOSES.length]!;
        let got: string;
        try {
          const response = await request(`${setup.proxy.url}/${status}/${close}`, {
            method: "PUT",
            body,
            dispatcher: client,
          });
          const text = await response.body.text();
          got = `${response.statusCode} ${response.headers["bearer-proxy-error"] ?? ""}`.trim();
          if (response.statusCode === status) {
            expect(JSON.parse(text)).toEqual({ error: REASONS[status] });
            // The client's body was not read to its end: its connection can't be reused.
            expect(response.headers.connection).toBe("close");
          }
        } catch (err) {
          got = `client error ${(err as { code?: string }).code}`;
        }
        results.push({
          expected: status,
          got: got.startsWith(String(status)) ? String(status) : got,
        });
      }
    } finally {
      await client.close();
    }
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `undici: ${UNDICI_TRIES} × 8 MiB PUT in ${seconds.toFixed(1)} s: ${JSON.stringify(tally(results))}`,
    );
    expect(results.filter((r) => r.got !== String(r.expected))).toEqual([]);
  }, 180_000);

  it(`curl -T, ${CURL_TRIES} tries: the upstream's answer every time, 0 × 502`, async () => {
    const results: { expected: number; got: string }[] = [];
    const started = performance.now();
    for (let i = 0; i < CURL_TRIES; i++) {
      const status = STATUSES[i % STATUSES.length]!;
      const close = CLOSES[Math.floor(i / STATUSES.length) % CLOSES.length]!;
      let got: string;
      try {
        const { stdout } = await run(
          "curl",
          [
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-T",
            bodyFile,
            `${setup.proxy.url}/${status}/${close}`,
          ],
          { timeout: 20_000 },
        );
        got = stdout.trim();
      } catch (err) {
        got = `curl failed: ${(err as { stderr?: string }).stderr?.trim()}`;
      }
      results.push({ expected: status, got });
    }
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `curl -T: ${CURL_TRIES} × 8 MiB PUT in ${seconds.toFixed(1)} s: ${JSON.stringify(tally(results))}`,
    );
    expect(results.filter((r) => r.got !== String(r.expected))).toEqual([]);
  }, 180_000);
});
