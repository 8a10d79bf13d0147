import type { IncomingMessage } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  basicHeader,
  emulatorUpstream,
  errorCode,
  htpasswdFile,
  httpGet,
  type KeepAliveClient,
  keepAliveClient,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";

/**
 * Issue 30: clients behind one address (a NAT, a mesh sidecar in front of the gateway) share the
 * guesser's block. A keep-alive connection on which a credential was verified before the block
 * began goes on being served with that credential; everything else from the blocked address —
 * the same credential on a new connection, another credential on the old connection (even one
 * verified elsewhere and cached), a WebSocket handshake — gets 429 without a check, so the block
 * tells the guesser nothing about any password.
 */

const CRON = { user: "reporting-cron", password: "cron-Pw9xQ" };
const BACKUP = { user: "backup-cron", password: "backup-Pw7kR" };
const SHARED = "127.0.0.8";

describe("a blocked address keeps the connections it proved before the block", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let pooled: KeepAliveClient;
  let billing: string;

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      files: {
        "callers.htpasswd": htpasswdFile({
          [CRON.user]: CRON.password,
          [BACKUP.user]: BACKUP.password,
        }),
      },
      config: {
        callers: { basic: { usersFile: "callers.htpasswd" } },
        upstreams: [
          emulatorUpstream(emulator.url, "billing", {
            allow: [{ user: CRON.user }, { user: BACKUP.user }],
          }),
        ],
      },
    });
    billing = `${gateway.url}/billing/echo`;
    pooled = keepAliveClient(SHARED);
  });
  afterAll(async () => {
    pooled?.close();
    await gateway?.close();
    await emulator?.close();
  });

  const fresh = (from: string, header: string) =>
    httpGet(billing, { localAddress: from, headers: { "proxy-authorization": header } });

  it("the pooled client proves its credential, then a guesser on the same address is blocked", async () => {
    const proved = await pooled.get(billing, {
      "proxy-authorization": basicHeader(CRON.user, CRON.password),
    });
    expect(proved.status).toBe(200);
    // BACKUP's credential is verified from another address: it sits in the cache.
    expect((await fresh("127.0.0.1", basicHeader(BACKUP.user, BACKUP.password))).status).toBe(200);

    for (let i = 0; i < 10; i++) {
      expect((await fresh(SHARED, basicHeader(BACKUP.user, `guess-${i}`))).status).toBe(407);
    }
    const blocked = await fresh(SHARED, basicHeader(BACKUP.user, "guess-10"));
    expect(blocked.status).toBe(429);
    expect(errorCode(blocked.text)).toBe("caller_throttled");
  });

  it("the pooled connection goes on being served with the credential it proved", async () => {
    for (let i = 0; i < 3; i++) {
      const answer = await pooled.get(billing, {
        "proxy-authorization": basicHeader(CRON.user, CRON.password),
      });
      expect(answer.reused).toBe(true);
      expect(answer.status).toBe(200);
    }
  });

  it("the same credential on a new connection from the address gets 429", async () => {
    const answer = await fresh(SHARED, basicHeader(CRON.user, CRON.password));
    expect(answer.status).toBe(429);
    expect(errorCode(answer.text)).toBe("caller_throttled");
    expect(Number(answer.headers["retry-after"])).toBeGreaterThan(0);
  });

  it("another credential on the pooled connection gets 429, even one verified and cached elsewhere", async () => {
    const cachedElsewhere = await pooled.get(billing, {
      "proxy-authorization": basicHeader(BACKUP.user, BACKUP.password),
    });
    expect(cachedElsewhere.reused).toBe(true);
    expect(cachedElsewhere.status).toBe(429);
    const guess = await pooled.get(billing, {
      "proxy-authorization": basicHeader(BACKUP.user, "guess-on-pooled"),
    });
    expect(guess.status).toBe(429);
    // The refusals did not cost the pooled client its own credential.
    const own = await pooled.get(billing, {
      "proxy-authorization": basicHeader(CRON.user, CRON.password),
    });
    expect(own).toMatchObject({ status: 200, reused: true });
  });

  it("a WebSocket handshake from the blocked address gets the same 429", async () => {
    const wsUrl = `${gateway.url.replace(/^http:/, "ws:")}/billing/ws`;
    const status = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(wsUrl, {
        localAddress: SHARED,
        headers: { "proxy-authorization": basicHeader(CRON.user, CRON.password) },
      });
      ws.on("open", () => reject(new Error("the handshake succeeded")));
      ws.on("error", () => {});
      ws.on("unexpected-response", (_req, res: IncomingMessage) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
    });
    expect(status).toBe(429);
  });

  it("other addresses are served meanwhile", async () => {
    expect((await fresh("127.0.0.1", basicHeader(CRON.user, CRON.password))).status).toBe(200);
  });
});
