import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type CallerAuthenticator,
  createCallerAuthenticator,
  parseProxyAuthorization,
} from "../../src/callers/authenticate.js";
import { credentialKey } from "../../src/callers/credential-key.js";
import { createHtpasswdUsers, type HtpasswdUsers } from "../../src/callers/htpasswd.js";
import {
  AUDIENCE,
  hashPassword,
  ISSUER,
  jwks,
  serviceAccountToken,
  signingKey,
  tempDir,
} from "./helpers.js";

const START_MS = 1_790_000_000_000;
let nowMs = START_MS;
const now = () => nowMs;
let dir: string;
let remove: () => Promise<void>;
let auth: CallerAuthenticator | undefined;

beforeEach(async () => {
  nowMs = START_MS;
  ({ dir, remove } = await tempDir());
});
afterEach(async () => {
  await auth?.close();
  auth = undefined;
  await remove();
});

const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

async function basicAuthenticator(options: { basicTtlMs?: number; maxEntries?: number } = {}) {
  const usersFile = join(dir, "users");
  await writeFile(usersFile, `alice:${hashPassword("pa:ss")}\nbob:${hashPassword("bob")}\n`);
  auth = createCallerAuthenticator({
    callers: { basic: { usersFile, maxConcurrentChecks: 1, maxQueuedChecks: 100 } },
    now,
    pollIntervalMs: 0,
    ...options,
  });
  return { auth, usersFile };
}

describe("parseProxyAuthorization", () => {
  it("schemes are case-insensitive; the password may contain colons", () => {
    expect(parseProxyAuthorization(`bAsIc ${Buffer.from("u:a:b:").toString("base64")}`)).toEqual({
      kind: "basic",
      user: "u",
      password: "a:b:",
    });
    expect(parseProxyAuthorization("BEARER abc.def.ghi")).toEqual({
      kind: "bearer",
      token: "abc.def.ghi",
    });
  });

  it.each([
    ["", "malformed"],
    ["Basic", "malformed"],
    ["Basic !!!!", "malformed"],
    ["Basic dXNlcg", "malformed"], // not padded base64
    [`Basic ${Buffer.from("no-colon").toString("base64")}`, "malformed"],
    [`Basic ${Buffer.from(":pw").toString("base64")}`, "malformed"],
    ["Bearer a b", "malformed"],
    ["Digest username=x", "unsupported_scheme"],
  ])("%j is %s", (header, reason) => {
    expect(parseProxyAuthorization(header)).toMatchObject({
      kind: "failure",
      authentication: { ok: false, reason },
    });
  });
});

describe("caller authenticator", () => {
  it("Basic: verified once, then peek answers synchronously until basicTtlMs", async () => {
    const { auth } = await basicAuthenticator({ basicTtlMs: 60_000 });
    const header = basic("alice", "pa:ss");
    expect(auth.peek(credentialKey(header))).toBeUndefined();
    const result = await auth.authenticate(header);
    expect(result).toEqual({
      ok: true,
      caller: { kind: "user", name: "alice" },
      expiresAtMs: START_MS + 60_000,
    });
    expect(auth.peek(credentialKey(header))).toEqual(result);
    nowMs += 59_999;
    expect(auth.peek(credentialKey(header))).toEqual(result);
    nowMs += 1;
    expect(auth.peek(credentialKey(header))).toBeUndefined();
  });

  it("failures are not cached, and unknown user and wrong password answer alike", async () => {
    const { auth } = await basicAuthenticator();
    const wrong = await auth.authenticate(basic("alice", "nope"));
    const unknown = await auth.authenticate(basic("mallory", "pa:ss"));
    expect(wrong).toMatchObject({ ok: false, reason: "bad_password" });
    expect(unknown).toMatchObject({ ok: false, reason: "unknown_user" });
    expect((wrong as { message: string }).message).toBe((unknown as { message: string }).message);
    expect(auth.peek(credentialKey(basic("alice", "nope")))).toBeUndefined();
  });

  it("a generation bump drops cached Basic results; the next authenticate verifies anew", async () => {
    const usersFile = join(dir, "users");
    await writeFile(usersFile, `alice:${hashPassword("old")}\n`);
    const users = createHtpasswdUsers({ file: usersFile, pollIntervalMs: 0 });
    auth = createCallerAuthenticator({
      callers: { basic: { usersFile, maxConcurrentChecks: 1, maxQueuedChecks: 100 } },
      users,
      now,
    });
    const header = basic("alice", "old");
    expect(await auth.authenticate(header)).toMatchObject({ ok: true });
    expect(auth.peek(credentialKey(header))).toBeDefined();

    await writeFile(usersFile, `alice:${hashPassword("new")}\n`);
    await users.check();
    expect(users.generation).toBe(1);
    expect(auth.peek(credentialKey(header))).toBeUndefined();
    expect(await auth.authenticate(header)).toMatchObject({ ok: false, reason: "bad_password" });
    expect(await auth.authenticate(basic("alice", "new"))).toMatchObject({ ok: true });
    users.close(); // given, not built, by the authenticator: it is the giver's to close
  });

  it("Bearer: cached until the token's exp", async () => {
    const key = await signingKey("k1");
    const jwksFile = join(dir, "jwks.json");
    await writeFile(jwksFile, jwks(key));
    auth = createCallerAuthenticator({
      callers: { kubernetes: { issuer: ISSUER, audiences: [AUDIENCE], jwksFile } },
      now,
      pollIntervalMs: 0,
    });
    const jwt = await serviceAccountToken(key, { nowSeconds: START_MS / 1000 });
    const header = `Bearer ${jwt}`;
    const result = await auth.authenticate(header);
    expect(result).toEqual({
      ok: true,
      caller: { kind: "serviceAccount", namespace: "payments", name: "billing-client" },
      expiresAtMs: START_MS + 3_600_000,
    });
    nowMs = START_MS + 3_599_999;
    expect(auth.peek(credentialKey(header))).toEqual(result);
    nowMs = START_MS + 3_600_000;
    expect(auth.peek(credentialKey(header))).toBeUndefined();
  });

  it("a scheme whose source is not configured is not_configured", async () => {
    const { auth } = await basicAuthenticator();
    expect(await auth.authenticate("Bearer a.b.c")).toMatchObject({
      ok: false,
      reason: "not_configured",
    });
    const none = createCallerAuthenticator({ callers: {} });
    expect(await none.authenticate(basic("alice", "pa:ss"))).toMatchObject({
      ok: false,
      reason: "not_configured",
    });
    await none.close();
  });

  it("holds at most maxEntries credentials", async () => {
    const { auth } = await basicAuthenticator({ maxEntries: 1 });
    await auth.authenticate(basic("alice", "pa:ss"));
    await auth.authenticate(basic("bob", "bob"));
    expect(auth.peek(credentialKey(basic("alice", "pa:ss")))).toBeUndefined();
    expect(auth.peek(credentialKey(basic("bob", "bob")))).toBeDefined();
  });
});

describe("single flight", () => {
  it("concurrent authenticate calls for one uncached header share one bcrypt compare", async () => {
    const usersFile = join(dir, "users");
    await writeFile(usersFile, `alice:${hashPassword("pw")}\n`);
    const real = createHtpasswdUsers({ file: usersFile, pollIntervalMs: 0 });
    let compares = 0;
    const users: HtpasswdUsers = {
      get generation() {
        return real.generation;
      },
      get size() {
        return real.size;
      },
      has: (user) => real.has(user),
      verify: (user, password) => {
        compares += 1;
        return real.verify(user, password);
      },
      status: () => real.status(),
      check: () => real.check(),
      close: () => real.close(),
    };
    auth = createCallerAuthenticator({
      callers: { basic: { usersFile, maxConcurrentChecks: 1, maxQueuedChecks: 100 } },
      users,
      now,
    });
    const header = basic("alice", "pw");
    const results = await Promise.all(Array.from({ length: 8 }, () => auth!.authenticate(header)));
    expect(compares).toBe(1);
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(results[0]).toMatchObject({ ok: true });

    // A failure is shared by those who asked together, then forgotten.
    const bad = basic("alice", "wrong");
    await Promise.all([auth.authenticate(bad), auth.authenticate(bad)]);
    expect(compares).toBe(2);
    await auth.authenticate(bad);
    expect(compares).toBe(3);
  });
});
