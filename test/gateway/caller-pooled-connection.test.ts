import { setTimeout } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLOCK_TOLERANCE_SECONDS } from "../../src/callers/service-account.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  basicHeader,
  emulatorUpstream,
  errorCode,
  es256SigningKey,
  htpasswdFile,
  type KeepAliveClient,
  KUBERNETES_ISSUER,
  keepAliveClient,
  rewriteUsersFile,
  type ServiceAccountPrivateKey,
  serviceAccountJwt,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";

/**
 * Issues 23 and 33: a pooled client repeats its `Proxy-Authorization` on one keep-alive
 * connection, and that connection is where a shortcut for the hot path would live (the
 * connection's key is already kept by connection-proofs.ts; issue 33 tried keeping its verified
 * credential, then its whole admission). Whatever voids a credential must void it on that
 * connection, on its very next request: a reload that drops the caller's rule, a users file that
 * changes the password or removes the user, a service-account token that expires. And what the
 * connection was admitted with holds for that credential and that upstream only.
 * Every request here goes over one keep-alive connection, and each answer says so.
 */

const CRON = { user: "reporting-cron", password: "cron-Pw9xQ" };
const USERS_FILE = "callers.htpasswd";
/** Twice the poll's bound in caller-live-reload.test.ts: a late reload is reported with its time. */
const FILE_CHANGE_WAIT_MS = 10_000;
const SA = { namespace: "payments", name: "billing-client" };

describe("a pooled connection's credential is voided like any other", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let pooled: KeepAliveClient;
  let signKey: ServiceAccountPrivateKey;
  let billing: string;
  let ledger: string;

  const document = (allow: Record<string, string>[]) => ({
    listen: { host: "127.0.0.1", port: 0 },
    admin: { host: "127.0.0.1", port: 0 },
    callers: {
      basic: { usersFile: USERS_FILE },
      kubernetes: { issuer: KUBERNETES_ISSUER, jwksFile: "jwks.json" },
    },
    upstreams: [
      emulatorUpstream(emulator.url, "billing", { allow }),
      // The service account only: the Basic user is admitted to billing, not here.
      emulatorUpstream(emulator.url, "ledger", {
        allow: [{ serviceAccount: `${SA.namespace}/${SA.name}` }],
      }),
    ],
  });
  const EVERYONE: Record<string, string>[] = [
    { user: CRON.user },
    { serviceAccount: `${SA.namespace}/${SA.name}` },
  ];

  const reloadWith = async (allow: Record<string, string>[]) => {
    const next = await gateway.load(document(allow));
    expect(await gateway.app.reload(next)).toEqual({ outcome: "applied" });
  };

  const rewriteUsers = (users: Record<string, string>) =>
    rewriteUsersFile(gateway, USERS_FILE, users, FILE_CHANGE_WAIT_MS);

  /** GET on the pooled connection, which must be the one the earlier requests used. */
  const pooledGet = async (header: string, url = billing) => {
    const answer = await pooled.get(url, { "proxy-authorization": header });
    expect(answer.reused).toBe(true);
    return answer;
  };

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    const key = await es256SigningKey();
    signKey = key.privateKey;
    gateway = await startAppUnderTest({
      caPem: pki.caPem,
      files: {
        [USERS_FILE]: htpasswdFile({ [CRON.user]: CRON.password }),
        "jwks.json": JSON.stringify({ keys: [key.jwk] }),
      },
      config: document(EVERYONE),
    });
    billing = `${gateway.url}/billing/echo`;
    ledger = `${gateway.url}/ledger/echo`;
    pooled = keepAliveClient("127.0.0.1");
    const first = await pooled.get(billing, {
      "proxy-authorization": basicHeader(CRON.user, CRON.password),
    });
    expect(first).toMatchObject({ status: 200, reused: false });
  });
  afterAll(async () => {
    pooled?.close();
    await gateway?.close();
    await emulator?.close();
  });

  it("admitted to one upstream, the connection is checked against another's rules (403)", async () => {
    const cron = basicHeader(CRON.user, CRON.password);
    for (let round = 0; round < 2; round++) {
      expect((await pooledGet(cron)).status).toBe(200);
      const refused = await pooledGet(cron, ledger);
      expect(refused.status).toBe(403);
      expect(errorCode(refused.text)).toBe("caller_not_allowed");
    }
  });

  it("another credential on the same connection is verified on its own (407 for a wrong password)", async () => {
    const cron = basicHeader(CRON.user, CRON.password);
    expect((await pooledGet(cron)).status).toBe(200);
    const wrong = await pooledGet(basicHeader(CRON.user, "not-the-password"));
    expect(wrong.status).toBe(407);
    expect(errorCode(wrong.text)).toBe("caller_unauthenticated");
    expect((await pooledGet(cron)).status).toBe(200);
  });

  it("a reload that drops the caller's rule refuses its next request (403); one that restores it admits", async () => {
    const cron = basicHeader(CRON.user, CRON.password);
    expect((await pooledGet(cron)).status).toBe(200);
    await reloadWith([{ serviceAccount: `${SA.namespace}/${SA.name}` }]);
    const refused = await pooledGet(cron);
    expect(refused.status).toBe(403);
    expect(errorCode(refused.text)).toBe("caller_not_allowed");
    await reloadWith(EVERYONE);
    expect((await pooledGet(cron)).status).toBe(200);
    expect((await pooledGet(cron)).status).toBe(200);
  });

  it("a changed password voids the old one on the connection that keeps sending it (407)", async () => {
    const old = basicHeader(CRON.user, CRON.password);
    expect((await pooledGet(old)).status).toBe(200);
    await rewriteUsers({ [CRON.user]: "cron-new-Pw" });
    const refused = await pooledGet(old);
    expect(refused.status).toBe(407);
    expect(errorCode(refused.text)).toBe("caller_unauthenticated");
    expect((await pooledGet(basicHeader(CRON.user, "cron-new-Pw"))).status).toBe(200);
  });

  it("a user removed from the users file loses the connection it was using (407)", async () => {
    const current = basicHeader(CRON.user, "cron-new-Pw");
    expect((await pooledGet(current)).status).toBe(200);
    expect((await pooledGet(current)).status).toBe(200);
    await rewriteUsers({ someone: "else-Pw" });
    const refused = await pooledGet(current);
    expect(refused.status).toBe(407);
    // And it stays refused: the failure left nothing behind to admit it.
    expect((await pooledGet(current)).status).toBe(407);
  });

  it("a service-account token is refused on its connection once it expires", async () => {
    // `exp` has whole seconds: this token lives 1–2 s from now, and is accepted for the
    // clock skew the proxy tolerates after that (checked anew on each request then, uncached).
    const expiresAtSeconds = Math.floor(Date.now() / 1000) + 2;
    const token = await serviceAccountJwt(signKey, {
      subject: `system:serviceaccount:${SA.namespace}:${SA.name}`,
      claims: {
        "kubernetes.io": { namespace: SA.namespace, serviceaccount: { name: SA.name, uid: "u-1" } },
      },
      expiresAt: expiresAtSeconds,
    });
    const header = `Bearer ${token}`;
    expect((await pooledGet(header)).status).toBe(200);
    expect((await pooledGet(header)).status).toBe(200);
    // The client keeps sending (an idle connection would be closed before the skew is over).
    const refusedFromMs = (expiresAtSeconds + CLOCK_TOLERANCE_SECONDS) * 1000 + 50;
    while (Date.now() < refusedFromMs) {
      const { status } = await pooledGet(header);
      if (Date.now() < expiresAtSeconds * 1000 - 100) expect(status).toBe(200);
      await setTimeout(250);
    }
    const refused = await pooledGet(header);
    expect(refused.status).toBe(407);
    expect(errorCode(refused.text)).toBe("caller_unauthenticated");
  });
});
