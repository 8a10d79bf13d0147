/**
 * Issue 34: requests inside a terminated CONNECT pass the same pacing gate as plain ones
 * (`upstreams[].rateLimit`): over the limit with no wait they get 429 `rate_limited` with the
 * error contract on the tunnel's connection (which stays usable); with a wait they queue and all
 * succeed; `by: caller` counts each CONNECT's caller on its own.
 */
import { ProxyAgent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { accessLines, basicHeader, htpasswdFile } from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import {
  interceptBlock,
  interceptedUpstream,
  requestOver,
  sendConnect,
  tlsThrough,
} from "./support/connect-client.js";

const files = useCaFiles("bp-connect-pacing-");
let ca: CaFiles;
let emulator: Emulator;
/** Two more HTTPS servers (/echo): each intercepted upstream needs an authority of its own. */
let others: FakeUpstream[];
let gateway: AppUnderTest;
const authorities: Record<string, string> = {};

beforeAll(async () => {
  const pki = await createTestPki();
  ca = await files.writeCa("ec-p256");
  emulator = await startTlsEmulator(pki, { host: "localhost" });
  others = await Promise.all([0, 1].map(() => startFakeUpstream({ cert: pki.good })));
  authorities.strict = new URL(emulator.url).host;
  const tokenUrl = `${emulator.url}/iam/v1/oauth2/token`;
  gateway = await startAppUnderTest({
    caPem: pki.caPem,
    files: { "callers.htpasswd": htpasswdFile({ alice: "alice-pw", bob: "bob-pw" }) },
    config: {
      callers: { basic: { usersFile: "callers.htpasswd" } },
      intercept: interceptBlock(ca),
      upstreams: [
        interceptedUpstream("strict", emulator.url, {
          rateLimit: { requests: 2, per: "60s", burst: 1, wait: "0s" },
        }),
        interceptedUpstream("queued", `https://localhost:${others[0]!.port}`, {
          tokenUrl,
          rateLimit: { requests: 4, per: "1s", wait: "20s" },
        }),
        interceptedUpstream("per-caller", `https://localhost:${others[1]!.port}`, {
          tokenUrl,
          allow: [{ user: "alice" }, { user: "bob" }],
          rateLimit: { requests: 1, per: "60s", wait: "0s", by: "caller" },
        }),
      ],
    },
  });
  authorities.queued = `localhost:${others[0]!.port}`;
  authorities.perCaller = `localhost:${others[1]!.port}`;
}, 30_000);
afterAll(async () => {
  await gateway?.close();
  await Promise.all((others ?? []).map((o) => o.close()));
  await emulator?.close();
});

async function openTunnel(authority: string, headers: Record<string, string> = {}) {
  const answer = await sendConnect(gateway.url, authority, headers);
  expect(answer.status).toBe(200);
  return tlsThrough(answer.socket, { host: "localhost", ca: ca.certPem });
}

describe("pacing inside a terminated CONNECT", () => {
  it("answers 429 rate_limited over the limit when none may wait; the tunnel stays usable", async () => {
    const tls = await openTunnel(authorities.strict!);
    try {
      const statuses: number[] = [];
      let refusal: Awaited<ReturnType<typeof requestOver>> | undefined;
      for (let i = 0; i < 4; i++) {
        const answer = await requestOver(tls, authorities.strict!, `/echo/strict-${i}`);
        statuses.push(answer.status);
        if (answer.status === 429) refusal = answer;
      }
      expect(statuses).toEqual([200, 200, 429, 429]);
      expect(refusal!.headers["bearer-proxy-error"]).toBe("rate_limited");
      expect(Number(refusal!.headers["retry-after"])).toBeGreaterThan(0);
      expect(JSON.parse(refusal!.text)).toMatchObject({ error: { code: "rate_limited" } });
      expect(tls.destroyed).toBe(false);
    } finally {
      tls.destroy();
    }
    await waitFor(
      () => accessLines(gateway.records).some((l) => l.path === "/echo/strict-3"),
      "the last access line",
    );
    expect(accessLines(gateway.records).find((l) => l.path === "/echo/strict-3")).toMatchObject({
      upstream: "strict",
      status: 429,
      errorCode: "rate_limited",
      via: "connect",
    });
  });

  it("queues requests over the limit when they may wait: all succeed, some waited", async () => {
    const dispatcher = new ProxyAgent({ uri: gateway.url, requestTls: { ca: ca.certPem } });
    try {
      const startMs = performance.now();
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          request(`https://${authorities.queued}/echo/queued-${i}`, { dispatcher }).then(
            async (r) => {
              await r.body.dump();
              return r.statusCode;
            },
          ),
        ),
      );
      expect(answers).toEqual(Array(8).fill(200));
      // Four a second, evenly: eight take at least 1.5 s.
      expect(performance.now() - startMs).toBeGreaterThan(1_500);
    } finally {
      await dispatcher.close();
    }
    const lines = accessLines(gateway.records).filter((l) => l.upstream === "queued");
    expect(lines).toHaveLength(8);
    expect(lines.every((l) => l.via === "connect")).toBe(true);
    expect(lines.filter((l) => Number(l.waitMs ?? 0) > 0).length).toBeGreaterThanOrEqual(4);
  });

  it("by: caller counts each CONNECT's caller on its own", async () => {
    const alice = await openTunnel(authorities.perCaller!, {
      "proxy-authorization": basicHeader("alice", "alice-pw"),
    });
    const bob = await openTunnel(authorities.perCaller!, {
      "proxy-authorization": basicHeader("bob", "bob-pw"),
    });
    try {
      const path = (who: string, i: number) => `/echo/${who}-${i}`;
      expect((await requestOver(alice, authorities.perCaller!, path("alice", 1))).status).toBe(200);
      expect((await requestOver(alice, authorities.perCaller!, path("alice", 2))).status).toBe(429);
      expect((await requestOver(bob, authorities.perCaller!, path("bob", 1))).status).toBe(200);
    } finally {
      alice.destroy();
      bob.destroy();
    }
    await waitFor(
      () => accessLines(gateway.records).some((l) => l.path === "/echo/bob-1"),
      "bob's access line",
    );
    const lines = accessLines(gateway.records).filter((l) => l.upstream === "per-caller");
    expect(lines.map((l) => [l.path, l.status, l.caller])).toEqual([
      ["/echo/alice-1", 200, "user:alice"],
      ["/echo/alice-2", 429, "user:alice"],
      ["/echo/bob-1", 200, "user:bob"],
    ]);
  });
});
