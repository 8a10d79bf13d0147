import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { sleep } from "../helpers/wait.js";
import { startTokenTap, type TapExchange, type TokenTap } from "./support/token-tap.js";
import { type Answer, runLoad } from "./support/traffic.js";

/**
 * Issue 9, "long runs", short variant (the long one is `npm run soak`): 15 s of constant load
 * while the emulator issues 3-second tokens, the credentials rotate once the way Kubernetes
 * rotates a mounted secret, and the token endpoint is down for 3 s in the middle.
 *
 * Pass: no request fails while a valid token existed, token requests ≈ the refresh count
 * (duration / (0.8 × 3 s)), and after the IdP dropped the old credentials nobody used them.
 *
 * "While" means for the whole of the request, from the client's start to its answer: the proxy
 * decides somewhere in between, and on a loaded two-core machine that can be 100 ms and more
 * after the client started (this process runs the client, the proxy and the token endpoint, and
 * an event-loop stall delays the proxy's turn; issue 32 saw four 503s started 10 ms before the
 * end of a token's window that the proxy had handled after it). The proxy's own rule — a token
 * counts from when its request was sent — is pinned by test/token/lifetime-from-send.test.ts.
 *
 * Why two client ids: the emulator keeps one secret per client id, so "old and new secret both
 * valid during the switch" is modelled as an old and a new client, both accepted for a while.
 */

const RUN_MS = 15_000;
/** The proxy sees expires_in = 3 (the emulator reports its lifetime minus one second). */
const EXPIRES_IN_S = 3;
const ROTATE_AT_MS = 3_000;
const DROP_OLD_AT_MS = 6_000;
const OUTAGE = { fromMs: 8_500, toMs: 11_500 };
const OLD = { clientId: "rot-old", clientSecret: "old-secret-Ω+&" };
const NEW = { clientId: "rot-new", clientSecret: "new-secret-✓%=" };

/** A secret volume as Kubernetes mounts it: files are symlinks into `..data`, swapped atomically. */
function createSecretVolume(): {
  dir: string;
  write(version: number, id: string, secret: string): void;
} {
  const dir = mkdtempSync(join(tmpdir(), "bp-secret-volume-"));
  const write = (version: number, id: string, secret: string) => {
    const target = `..v${version}`;
    mkdirSync(join(dir, target));
    writeFileSync(join(dir, target, "client-id"), id);
    writeFileSync(join(dir, target, "client-secret"), `${secret}\n`);
    symlinkSync(target, join(dir, "..data_tmp"));
    renameSync(join(dir, "..data_tmp"), join(dir, "..data"));
  };
  return { dir, write };
}

/** When a token from this exchange was usable by the proxy's rules (10% margin), with slack. */
function validWindow(exchange: TapExchange): [number, number] | undefined {
  if (exchange.accessToken === undefined || exchange.answeredAtMs === undefined) return undefined;
  const lifetimeMs = Number(exchange.expiresIn) * 1000;
  return [exchange.answeredAtMs + 100, exchange.receivedAtMs + lifetimeMs * 0.9 - 100];
}

describe("long run, short variant", () => {
  let emulator: Emulator;
  let tap: TokenTap;
  let aut: AppUnderTest;
  let volume: ReturnType<typeof createSecretVolume>;
  let answers: Answer[] = [];
  let startMs = 0;
  /** When the outage really began and ended (a stalled timer fires late). */
  const outage = { fromMs: 0, toMs: 0 };

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki, {
      clients: [OLD],
      tokenLifetimeSeconds: EXPIRES_IN_S + 1,
    });
    tap = await startTokenTap({ target: emulator.url, caPem: pki.caPem, cert: pki.good });
    volume = createSecretVolume();
    volume.write(1, OLD.clientId, OLD.clientSecret);
    symlinkSync("..data/client-id", join(volume.dir, "client-id"));
    symlinkSync("..data/client-secret", join(volume.dir, "client-secret"));
    aut = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        upstreams: [
          {
            name: "api",
            baseUrl: emulator.url,
            tokenUrl: tap.tokenUrl,
            clientIdFile: join(volume.dir, "client-id"),
            clientSecretFile: join(volume.dir, "client-secret"),
            token: { waitTimeout: "1s", initialBackoff: "200ms", maxBackoff: "1s" },
          },
        ],
      },
    });
    const agent = new Agent({ connections: 8 });
    startMs = Date.now();
    const at = (ms: number, action: () => void) => sleep(ms).then(action);
    try {
      [answers] = await Promise.all([
        runLoad({
          urls: [`${aut.url}/platform/v1/spreadsheets/demo`, `${aut.url}/echo/soak`],
          concurrency: 4,
          dispatcher: agent,
          durationMs: RUN_MS,
          pauseMs: 10,
        }),
        at(ROTATE_AT_MS, () => {
          emulator.setClients([OLD, NEW]);
          volume.write(2, NEW.clientId, NEW.clientSecret);
        }),
        at(DROP_OLD_AT_MS, () => emulator.setClients([NEW])),
        at(OUTAGE.fromMs, () => {
          emulator.setTokenFault((_req, res) => {
            res.writeHead(503, { "content-type": "text/plain" });
            res.end("down for maintenance");
          });
          outage.fromMs = Date.now();
        }),
        at(OUTAGE.toMs, () => {
          emulator.setTokenFault(undefined);
          outage.toMs = Date.now();
        }),
      ]);
    } finally {
      await agent.close();
    }
  }, 40_000);

  afterAll(async () => {
    await aut?.close();
    await tap?.close();
    await emulator?.close();
    if (volume) rmSync(volume.dir, { recursive: true, force: true });
  });

  it("carried real load", () => {
    expect(answers.length).toBeGreaterThan(300);
    expect(answers.filter((a) => a.status === 200).length).toBeGreaterThan(answers.length * 0.6);
  });

  it("no request failed while a valid token existed; the others got the documented error", () => {
    const windows = tap.exchanges.flatMap((e) => {
      const window = validWindow(e);
      return window ? [window] : [];
    });
    const failed = answers.filter((a) => a.status !== 200);
    const whileValid = failed.filter((a) =>
      windows.some(([from, to]) => a.startMs >= from && a.endMs <= to),
    );
    expect(
      whileValid.map(
        (a) => `${a.startMs - startMs}–${a.endMs - startMs} ms: ${a.status} ${a.code}`,
      ),
    ).toEqual([]);
    for (const answer of failed) {
      expect(answer.status).toBe(503);
      expect(answer.code).toBe("token_unavailable");
      // Only the outage (plus the time its last token still covered, and recovery) may fail.
      expect(answer.startMs).toBeGreaterThanOrEqual(outage.fromMs);
      expect(answer.endMs).toBeLessThanOrEqual(outage.toMs + 1_500);
    }
  });

  it("token requests ≈ duration / (0.8 × lifetime), failed attempts bounded during the outage", () => {
    const expected = RUN_MS / (0.8 * EXPIRES_IN_S * 1000);
    const succeeded = tap.exchanges.filter((e) => e.status === 200).length;
    const failedAttempts = tap.exchanges.filter((e) => e.status !== 200).length;
    console.info(
      `long-run-short: ${answers.length} requests, ${answers.filter((a) => a.status !== 200).length} failed, ` +
        `${succeeded} tokens (expected ≈ ${expected.toFixed(1)}), ${failedAttempts} failed attempts`,
    );
    // One more for the rotation (the old token is dropped at once), fewer for the outage.
    expect(succeeded).toBeGreaterThanOrEqual(Math.floor(expected * 0.6));
    expect(succeeded).toBeLessThanOrEqual(Math.ceil(expected * 1.4) + 1);
    // 3 s of outage, at most one attempt per minRefreshInterval (1 s) plus the one under way.
    expect(failedAttempts).toBeGreaterThanOrEqual(1);
    expect(failedAttempts).toBeLessThanOrEqual(5);
  });

  it("the rotation was picked up without a restart, and the old client was never used after it was dropped", () => {
    const byClient = (id: string) => tap.exchanges.filter((e) => e.clientId === id);
    expect(byClient(OLD.clientId).length).toBeGreaterThan(0);
    expect(byClient(NEW.clientId).length).toBeGreaterThan(0);
    const lateOld = byClient(OLD.clientId).filter((e) => e.receivedAtMs - startMs > DROP_OLD_AT_MS);
    expect(lateOld).toEqual([]);
    expect(tap.exchanges.every((e) => e.status !== 401)).toBe(true);
    expect(answers.some((a) => a.code === "token_rejected")).toBe(false);
  });
});
