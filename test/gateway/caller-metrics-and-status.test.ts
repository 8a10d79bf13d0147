import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Denial } from "../../src/callers/denial-log.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  adminText,
  basicHeader,
  basicValue,
  callerDenialCounts,
  emulatorUpstream,
  es256SigningKey,
  expectNoSecrets,
  type HttpAnswer,
  htpasswdFile,
  httpGet,
  KUBERNETES_ISSUER,
  serviceAccountJwt,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";

/**
 * Issue 23, seen by an operator: `bearer_proxy_caller_denied_total{upstream,reason}` counts every
 * refusal by reason, and /status lists each guarded upstream's rules in short form (nothing for
 * open ones) and the recent refusals newest first — caller labels, never a credential.
 */

const CRON = { user: "reporting-cron", password: "cron-Pw9xQ" };
const ALICE = { user: "alice", password: "alice-pw" };

describe("caller refusals in /metrics and /status", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let signKey: Awaited<ReturnType<typeof es256SigningKey>>["privateKey"];
  const tokens: string[] = [];
  const answers: HttpAnswer[] = [];

  const saToken = async (namespace: string, name: string, expiresAt: string | number = "10m") => {
    const token = await serviceAccountJwt(signKey, {
      subject: `system:serviceaccount:${namespace}:${name}`,
      expiresAt,
    });
    tokens.push(token);
    return token;
  };

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    const key = await es256SigningKey();
    signKey = key.privateKey;
    const jwk = key.jwk;
    const upstream = (name: string, allow?: Record<string, string>[]) =>
      emulatorUpstream(emulator.url, name, allow ? { allow } : {});
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      files: {
        "callers.htpasswd": htpasswdFile({
          [CRON.user]: CRON.password,
          [ALICE.user]: ALICE.password,
        }),
        "jwks.json": JSON.stringify({ keys: [jwk] }),
      },
      config: {
        callers: {
          basic: { usersFile: "callers.htpasswd" },
          kubernetes: { issuer: KUBERNETES_ISSUER, jwksFile: "jwks.json" },
        },
        upstreams: [
          upstream("billing", [
            { user: CRON.user },
            { serviceAccount: "payments/billing-client" },
            { namespace: "ops" },
          ]),
          upstream("internal", [{ cidr: "127.0.0.2/32" }]),
          upstream("open"),
        ],
      },
    });
  });
  afterAll(async () => {
    await gateway?.close();
    await emulator?.close();
  });

  const get = async (path: string, credential?: string, localAddress = "127.0.0.1") => {
    const answer = await httpGet(`${gateway.url}${path}`, {
      localAddress,
      headers: credential === undefined ? {} : { "proxy-authorization": credential },
    });
    answers.push(answer);
    return answer.status;
  };

  /** Refusals made by the first test, oldest first, as /status should list them (reversed). */
  const expectedDenials: Omit<Denial, "at">[] = [];

  it("answers every kind of request as its rules say", async () => {
    const deny = (upstream: string, reason: Denial["reason"], caller: string) =>
      expectedDenials.push({ upstream, reason, caller });

    // Admitted: none of these is counted.
    expect(await get("/billing/echo", basicHeader(CRON.user, CRON.password))).toBe(200);
    expect(await get("/billing/echo", `Bearer ${await saToken("ops", "reports")}`)).toBe(200);
    expect(await get("/internal/echo", undefined, "127.0.0.2")).toBe(200);
    expect(await get("/open/echo")).toBe(200);

    expect(await get("/billing/echo")).toBe(407);
    deny("billing", "no_credential", "addr:127.0.0.1");
    expect(await get("/billing/echo", basicHeader(CRON.user, "wrong-password"))).toBe(407);
    deny("billing", "invalid_credential", "addr:127.0.0.1");
    const expired = await saToken("payments", "billing-client", Math.floor(Date.now() / 1000) - 60);
    expect(await get("/billing/echo", `Bearer ${expired}`)).toBe(407);
    deny("billing", "invalid_credential", "addr:127.0.0.1");
    expect(await get("/billing/echo", basicHeader(ALICE.user, ALICE.password))).toBe(403);
    deny("billing", "not_allowed", "user:alice");
    expect(await get("/billing/echo", `Bearer ${await saToken("payments", "other")}`)).toBe(403);
    deny("billing", "not_allowed", "sa:payments/other");
    expect(await get("/internal/echo")).toBe(403);
    deny("internal", "not_allowed", "addr:127.0.0.1");
    for (let i = 0; i < 10; i++) {
      expect(await get("/billing/echo", basicHeader(CRON.user, `guess-${i}`), "127.0.0.6")).toBe(
        407,
      );
      deny("billing", "invalid_credential", "addr:127.0.0.6");
    }
    expect(await get("/billing/echo", basicHeader(CRON.user, "guess-10"), "127.0.0.6")).toBe(429);
    deny("billing", "throttled", "addr:127.0.0.6");
  });

  it("/metrics counts each refusal by upstream and reason", async () => {
    const counts = callerDenialCounts(await adminText(gateway.adminUrl, "/metrics"));
    expect(counts).toEqual({
      "billing/no_credential": 1,
      "billing/invalid_credential": 12,
      "billing/not_allowed": 2,
      "billing/throttled": 1,
      "internal/not_allowed": 1,
    });
  });

  it("/status shows the rules of guarded upstreams only, and the refusals newest first", async () => {
    const status = JSON.parse(await adminText(gateway.adminUrl, "/status?format=json")) as {
      upstreams: { name: string; allow?: string[] }[];
      callerDenials?: Denial[];
    };
    const byName = Object.fromEntries(status.upstreams.map((u) => [u.name, u]));
    expect(byName.billing!.allow).toEqual([
      `user ${CRON.user}`,
      "sa payments/billing-client",
      "sa ops/*",
    ]);
    expect(byName.internal!.allow).toEqual(["cidr 127.0.0.2/32"]);
    expect(byName.open).toBeDefined();
    expect(byName.open).not.toHaveProperty("allow");

    const denials = status.callerDenials ?? [];
    expect(denials.map(({ at: _at, ...rest }) => rest)).toEqual([...expectedDenials].reverse());
    const times = denials.map((d) => Date.parse(d.at));
    expect(times.every((t) => Number.isFinite(t))).toBe(true);
    expect(times).toEqual([...times].sort((a, b) => b - a));
  });

  it("no password, Basic value or JWT in /status (JSON and page), /metrics, logs or bodies", async () => {
    const secrets = [
      CRON.password,
      ALICE.password,
      "wrong-password",
      basicValue(CRON.user, CRON.password),
      basicValue(ALICE.user, ALICE.password),
      basicValue(CRON.user, "wrong-password"),
      ...Array.from({ length: 11 }, (_, i) => basicValue(CRON.user, `guess-${i}`)),
      ...tokens,
    ];
    expectNoSecrets(
      {
        status: await adminText(gateway.adminUrl, "/status?format=json"),
        page: await adminText(gateway.adminUrl, "/status?format=html"),
        detail: await adminText(gateway.adminUrl, "/status/upstreams/billing"),
        metrics: await adminText(gateway.adminUrl, "/metrics"),
        logs: gateway.lines,
        bodies: answers.map((a) => a.text),
      },
      secrets,
    );
  });
});
