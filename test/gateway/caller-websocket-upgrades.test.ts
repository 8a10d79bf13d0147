import type { IncomingMessage } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  accessLines,
  adminPages,
  basicHeader,
  basicValue,
  errorCode,
  es256SigningKey,
  expectNoSecrets,
  htpasswdFile,
  KUBERNETES_ISSUER,
  rawValues,
  serviceAccountJwt,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import { headerValues, startWsUpstream, type WsUpstream } from "../protocol/ws-upstream.js";

/**
 * Issue 23: a WebSocket handshake passes the same caller gate as a plain request — 407 without a
 * credential, 403 for a caller no rule names, 101 for one that is — and a refused handshake
 * never reaches the upstream.
 */

const ALICE = { user: "alice", password: "alice-ws-pw" };
const BOB = { user: "bob", password: "bob-ws-pw" };

interface Refusal {
  status: number;
  raw: string[];
  body: string;
}

/** A handshake that must not succeed: the answer the client got instead. */
function refusedHandshake(url: string, headers: Record<string, string> = {}): Promise<Refusal> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on("open", () => reject(new Error("the handshake succeeded")));
    ws.on("error", () => {});
    ws.on("unexpected-response", (_req, res: IncomingMessage) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, raw: res.rawHeaders, body }));
    });
  });
}

/** Open, send one message, resolve with the echo; closes the socket. */
function echoOnce(url: string, headers: Record<string, string>, message: string) {
  return new Promise<{ status: number; echo: string }>((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    let status = 0;
    ws.on("upgrade", (res) => {
      status = res.statusCode ?? 0;
    });
    ws.on("open", () => ws.send(message));
    ws.on("message", (data) => {
      ws.close();
      resolve({ status, echo: data.toString() });
    });
    ws.on("error", reject);
    ws.on("unexpected-response", (_req, res) => reject(new Error(`status ${res.statusCode}`)));
  });
}

describe("WebSocket upgrades through the caller gate", () => {
  let emulator: Emulator;
  let upstream: WsUpstream;
  let gateway: AppUnderTest;
  let wsUrl: string;
  let saToken: string;
  const bodies: string[] = [];

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    upstream = await startWsUpstream({ cert: pki.good });
    const { privateKey, jwk } = await es256SigningKey();
    saToken = await serviceAccountJwt(privateKey, {
      subject: "system:serviceaccount:payments:ws-client",
    });
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      files: {
        "callers.htpasswd": htpasswdFile({
          [ALICE.user]: ALICE.password,
          [BOB.user]: BOB.password,
        }),
        "jwks.json": JSON.stringify({ keys: [jwk] }),
      },
      config: {
        callers: {
          basic: { usersFile: "callers.htpasswd" },
          kubernetes: { issuer: KUBERNETES_ISSUER, jwksFile: "jwks.json" },
        },
        upstreams: [
          {
            name: "chat",
            baseUrl: upstream.origin,
            tokenUrl: `${emulator.url}/iam/v1/oauth2/token`,
            clientId: "demo-client",
            clientSecret: "demo-secret",
            match: { pathPrefix: "/ws" },
            allow: [{ user: ALICE.user }, { serviceAccount: "payments/ws-client" }],
          },
        ],
      },
    });
    wsUrl = gateway.url.replace(/^http:/, "ws:");
  });
  afterAll(async () => {
    await gateway?.close();
    await upstream?.close();
    await emulator?.close();
  });

  it("no credential: 407 on the handshake with both challenges; the upstream sees no handshake", async () => {
    const before = upstream.handshakes.length;
    const res = await refusedHandshake(`${wsUrl}/ws/chat`);
    bodies.push(res.body);
    expect(res.status).toBe(407);
    expect(rawValues(res.raw, "proxy-authenticate")).toEqual([
      'Basic realm="bearer-proxy"',
      'Bearer realm="bearer-proxy"',
    ]);
    expect(errorCode(res.body)).toBe("caller_unauthenticated");
    expect(upstream.handshakes.length).toBe(before);
  });

  it("a listed user: 101, the echo works, and the upstream saw the token, not the credential", async () => {
    const before = upstream.handshakes.length;
    const { status, echo } = await echoOnce(
      `${wsUrl}/ws/chat`,
      { "proxy-authorization": basicHeader(ALICE.user, ALICE.password) },
      "hello through the gate",
    );
    expect(status).toBe(101);
    expect(echo).toBe("hello through the gate");
    expect(upstream.handshakes.length).toBe(before + 1);
    const seen = upstream.handshakes.at(-1)!.headers;
    expect(headerValues(seen, "proxy-authorization")).toEqual([]);
    expect(headerValues(seen, "authorization")[0]).toMatch(/^Bearer /);
  });

  it("a listed service account (Bearer): 101 and echo", async () => {
    const { status, echo } = await echoOnce(
      `${wsUrl}/ws/chat`,
      { "proxy-authorization": `Bearer ${saToken}` },
      "sa says hi",
    );
    expect(status).toBe(101);
    expect(echo).toBe("sa says hi");
    expect(headerValues(upstream.handshakes.at(-1)!.headers, "authorization")[0]).not.toContain(
      saToken,
    );
  });

  it("a valid user no rule names: 403; a wrong password: 407; neither reaches the upstream", async () => {
    const before = upstream.handshakes.length;
    const other = await refusedHandshake(`${wsUrl}/ws/chat`, {
      "proxy-authorization": basicHeader(BOB.user, BOB.password),
    });
    bodies.push(other.body);
    expect(other.status).toBe(403);
    expect(errorCode(other.body)).toBe("caller_not_allowed");
    const wrong = await refusedHandshake(`${wsUrl}/ws/chat`, {
      "proxy-authorization": basicHeader(ALICE.user, "not-her-password"),
    });
    bodies.push(wrong.body);
    expect(wrong.status).toBe(407);
    expect(upstream.handshakes.length).toBe(before);
  });

  it("logs each handshake with its caller", async () => {
    // An upgraded connection's line is written when its relay ends, so order is not asserted.
    const lines = () => accessLines(gateway.records).filter((l) => l.upstream === "chat");
    await waitFor(() => lines().length === 5, "five access lines");
    expect(lines().map((l) => [l.status, l.caller])).toEqual(
      expect.arrayContaining([
        [407, "addr:127.0.0.1"],
        [101, "user:alice"],
        [101, "sa:payments/ws-client"],
        [403, "user:bob"],
        [407, "addr:127.0.0.1"],
      ]),
    );
  });

  it("no password, Basic value or JWT in logs, error bodies, /status or /metrics", async () => {
    expectNoSecrets(
      {
        logs: gateway.lines,
        bodies,
        ...(await adminPages(gateway.adminUrl)),
      },
      [
        ALICE.password,
        BOB.password,
        "not-her-password",
        basicValue(ALICE.user, ALICE.password),
        basicValue(BOB.user, BOB.password),
        basicValue(ALICE.user, "not-her-password"),
        saToken,
      ],
    );
  });
});
