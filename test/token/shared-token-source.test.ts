/** The token source behind the Redis-shared cache: lifetimes of shared tokens, 401 handling, keys. */
import { Agent } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { fingerprint } from "../../src/base/fingerprint.js";
import { sharedCredentialKey } from "../../src/config/credential-identity.js";
import type {
  GetOrFetchArgs,
  SharedToken,
  SharedTokenCache,
} from "../../src/token/shared-token-cache.js";
import { createSharedTokenSourceFactory } from "../../src/token/shared-token-source.js";
import type { TokenProvider } from "../../src/token/token-provider.js";
import { FakeClock } from "../helpers/fake-clock.js";
import { captureLogs, DEFAULT_POLICY, makeSpec, TEST_SECRET } from "./helpers.js";

const agent = new Agent();
let source: TokenProvider | undefined;
afterEach(() => source?.close());

/** A shared cache that answers every getOrFetch with what `next` makes, recording the args. */
function fakeCache(next: (args: GetOrFetchArgs) => SharedToken) {
  const calls: GetOrFetchArgs[] = [];
  const cache: SharedTokenCache = {
    getOrFetch: async (args) => {
      calls.push(args);
      return next(args);
    },
    state: () => "up",
    close: async () => {},
  };
  return { cache, calls };
}

function setup(next: (args: GetOrFetchArgs, clock: FakeClock) => SharedToken) {
  const clock = new FakeClock();
  const { cache, calls } = fakeCache((args) => next(args, clock));
  source = createSharedTokenSourceFactory(cache, () => clock.wallNow())({
    upstream: "api",
    spec: makeSpec(),
    policy: DEFAULT_POLICY,
    dispatcher: agent,
    clock,
    logger: captureLogs().logger,
    random: () => 0.5,
  });
  return { clock, calls, source };
}

/** A token another replica fetched `ageMs` ago with `lifetimeMs` lifetime. */
function sharedToken(clock: FakeClock, value: string, ageMs: number, lifetimeMs: number) {
  const obtainedAtWallMs = clock.wallNow() - ageMs;
  return {
    accessToken: value,
    tokenType: "Bearer",
    scope: "files:read",
    obtainedAtWallMs,
    expiresAtWallMs: obtainedAtWallMs + lifetimeMs,
  };
}

describe("shared token source", () => {
  it("never uses a token from Redis past the expiry it had there, even under a second left", async () => {
    // A 3-second token another replica fetched 2.2 s ago: 800 ms left.
    const { clock, source } = setup((_args, c) => sharedToken(c, "shared-1", 2_200, 3_000));
    const token = await source.getToken();
    expect(token.value).toBe("shared-1");
    expect(token.expiresAtWallMs).toBeLessThanOrEqual(clock.wallNow() + 800);
    await clock.advance(800);
    expect(source.peekToken()?.value).not.toBe("shared-1");
  });

  it("keeps the remaining lifetime to the millisecond, not rounded down to whole seconds", async () => {
    const { clock, source } = setup((_args, c) => sharedToken(c, "shared-2", 100_500, 600_000));
    const token = await source.getToken();
    expect(token.expiresAtWallMs).toBe(clock.wallNow() + 499_500);
  });

  it("after an upstream 401 asks the cache to skip the rejected token, once", async () => {
    let issued = 0;
    const { clock, calls, source } = setup((_args, c) => {
      issued++;
      return sharedToken(c, `shared-${issued}`, 0, 600_000);
    });
    const first = await source.getToken();
    await clock.advance(DEFAULT_POLICY.minAgeBeforeInvalidateMs);
    expect(source.invalidate(first)).toBe(true);
    const second = await source.getToken();
    expect(second.value).toBe("shared-2");
    expect(calls.map((c) => c.rejectFingerprint)).toEqual([undefined, fingerprint("shared-1")]);

    // The next refresh carries no stale rejection.
    await clock.advance(600_000);
    await source.getToken();
    expect(calls[2]?.rejectFingerprint).toBeUndefined();
  });

  it("keys the cache by what decides the token, never by the secret", async () => {
    const { calls, source } = setup((_args, c) => sharedToken(c, "shared-3", 0, 600_000));
    await source.getToken();
    const key = calls[0]!.credentialKey;
    expect(key).toBe(sharedCredentialKey(makeSpec(), "demo-client"));
    expect(key).not.toContain(TEST_SECRET);
    expect(calls[0]!.secret).toBe(TEST_SECRET);
    expect(sharedCredentialKey(makeSpec({ scope: "files:read" }), "demo-client")).not.toBe(key);
  });

  it("issue 14: the key covers every input that changes the token — tenant headers and the TLS client identity too", () => {
    const base = makeSpec();
    const key = sharedCredentialKey(base, "demo-client");
    const variants: Partial<ReturnType<typeof makeSpec>>[] = [
      { extraHeaders: { "x-tenant": "b" } },
      { tls: { ...base.tls, certFile: "/run/tenant-b.crt", keyFile: "/run/tenant-b.key" } },
      { tls: { ...base.tls, serverName: "tenant-b.idp.test" } },
      { extraParams: { resource: "b" } },
      { tokenUrl: "https://idp.test/other/token" },
    ];
    for (const variant of variants) {
      expect(sharedCredentialKey({ ...base, ...variant }, "demo-client")).not.toBe(key);
    }
    // Not the secret (it keys the encryption instead), nor where the client id was read from.
    expect(
      sharedCredentialKey(
        { ...base, clientSecret: { kind: "inline", value: "rotated" } },
        "demo-client",
      ),
    ).toBe(key);
    expect(
      sharedCredentialKey(
        { ...base, clientId: { kind: "file", path: "/elsewhere/id" } },
        "demo-client",
      ),
    ).toBe(key);
    // Nor which CA file vouches for the token endpoint: it decides trust, not the token.
    expect(
      sharedCredentialKey(
        { ...base, tls: { ...base.tls, caFile: "/other/ca.pem" } },
        "demo-client",
      ),
    ).toBe(key);
  });
});
