import bcrypt from "bcryptjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  basicHeader,
  emulatorUpstream,
  es256SigningKey,
  httpGet,
  KUBERNETES_ISSUER,
  serviceAccountJwt,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";

/**
 * Issue 23: who may use which credential. A real app (htpasswd users, a service-account JWKS,
 * allow lists) in front of the emulator; callers on 127.0.0.1 and, for address rules, 127.0.0.2.
 */

const PASSWORD = "cron-password-Zq9";

describe("caller authorization (upstreams[].allow)", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let signKey: Awaited<ReturnType<typeof es256SigningKey>>["privateKey"];

  const saToken = (namespace: string, name: string, claims: Record<string, unknown> = {}) =>
    serviceAccountJwt(signKey, {
      subject: `system:serviceaccount:${namespace}:${name}`,
      claims: { "kubernetes.io": { namespace, serviceaccount: { name, uid: "u-1" } }, ...claims },
    });

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    const key = await es256SigningKey();
    signKey = key.privateKey;
    const jwk = key.jwk;
    const htpasswd = [
      `reporting-cron:${bcrypt.hashSync(PASSWORD, 4).replace(/^\$2b\$/, "$2y$")}`,
      `alice:${bcrypt.hashSync("alice-pw", 4)}`,
    ].join("\n");
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      files: { "callers.htpasswd": `${htpasswd}\n`, "jwks.json": JSON.stringify({ keys: [jwk] }) },
      config: {
        callers: {
          basic: { usersFile: "callers.htpasswd" },
          kubernetes: { issuer: KUBERNETES_ISSUER, jwksFile: "jwks.json" },
        },
        upstreams: [
          emulatorUpstream(emulator.url, "billing", {
            allow: [
              { user: "reporting-cron" },
              { serviceAccount: "payments/billing-client" },
              { namespace: "ops" },
            ],
          }),
          emulatorUpstream(emulator.url, "internal", { allow: [{ cidr: "127.0.0.2/32" }] }),
        ],
      },
    });
  });
  afterAll(async () => {
    await gateway?.close();
    await emulator?.close();
  });

  /** A plain GET through node:http, from `localAddress` (undici's Agent has no such option). */
  const get = (path: string, headers: Record<string, string> = {}, localAddress = "127.0.0.1") =>
    httpGet(`${gateway.url}${path}`, { headers, localAddress });
  const basic = basicHeader;

  it("answers 407 with exact challenges and never reaches the upstream without a credential", async () => {
    const before = emulator.stats().apiRequests;
    const res = await get("/billing/echo");
    expect(res.status).toBe(407);
    // Two field lines (curl and git read each challenge; git answers the Basic one).
    const challenges = res.raw.filter(
      (_, i) => i % 2 === 1 && res.raw[i - 1]!.toLowerCase() === "proxy-authenticate",
    );
    expect(challenges).toEqual(['Basic realm="bearer-proxy"', 'Bearer realm="bearer-proxy"']);
    expect(JSON.parse(res.text).error.code).toBe("caller_unauthenticated");
    expect(emulator.stats().apiRequests).toBe(before);
  });

  it("forwards a listed Basic user, without its Proxy-Authorization", async () => {
    const res = await get("/billing/echo", {
      "proxy-authorization": basic("reporting-cron", PASSWORD),
    });
    expect(res.status).toBe(200);
    expect(res.text.toLowerCase()).not.toContain("proxy-authorization");
    expect(res.text).not.toContain(PASSWORD);
  });

  it("refuses a valid user no rule names with 403, a wrong password with 407", async () => {
    const other = await get("/billing/echo", { "proxy-authorization": basic("alice", "alice-pw") });
    expect(other.status).toBe(403);
    expect(JSON.parse(other.text).error.code).toBe("caller_not_allowed");
    const wrong = await get("/billing/echo", {
      "proxy-authorization": basic("reporting-cron", "nope"),
    });
    expect(wrong.status).toBe(407);
  });

  it("forwards listed service accounts and namespaces, refuses others", async () => {
    const ok = await get("/billing/echo", {
      "proxy-authorization": `Bearer ${await saToken("payments", "billing-client")}`,
    });
    expect(ok.status).toBe(200);
    const ns = await get("/billing/echo", {
      "proxy-authorization": `Bearer ${await saToken("ops", "anything")}`,
    });
    expect(ns.status).toBe(200);
    const other = await get("/billing/echo", {
      "proxy-authorization": `Bearer ${await saToken("payments", "other")}`,
    });
    expect(other.status).toBe(403);
  });

  it("admits by the TCP peer's address and refuses other addresses with 403", async () => {
    const inside = await get("/internal/echo", {}, "127.0.0.2");
    expect(inside.status).toBe(200);
    const outside = await get("/internal/echo", {}, "127.0.0.1");
    expect(outside.status).toBe(403);
    expect(JSON.parse(outside.text).error.code).toBe("caller_not_allowed");
  });

  it("logs who asked, and never the credential", async () => {
    const lines = gateway.lines.join("\n");
    expect(lines).toContain('"caller":"user:reporting-cron"');
    expect(lines).toContain('"caller":"sa:payments/billing-client"');
    expect(lines).toContain('"caller":"addr:127.0.0.2"');
    expect(lines).not.toContain(PASSWORD);
    expect(lines).not.toContain(Buffer.from(`reporting-cron:${PASSWORD}`).toString("base64"));
  });
});
