import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { FetchImplementation } from "jose";
import { Agent } from "undici";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  createJwksFetch,
  withFailureBackoff,
  withLastGoodKeys,
} from "../../src/callers/jwks-fetch.js";
import {
  JWKS_COOLDOWN_MS,
  JWKS_MAX_AGE_MS,
  JWKS_RETRY_AFTER_FAILURE_MS,
  JWKS_STALE_LIMIT_MS,
} from "../../src/callers/jwks-source.js";
import { createServiceAccountVerifier } from "../../src/callers/service-account.js";
import { capturingLogger, type SigningKey, serviceAccountToken, signingKeys } from "./helpers.js";
import { useJwksBench } from "./support/jwks-server.js";

/**
 * A `jwksUri` whose refresh fails (an API-server outage: 500s, then connection refused) keeps the
 * keys last fetched in force: jose would drop them at its 10-minute refresh and refuse every
 * service-account caller. One warning a minute says how old the kept keys are and why the
 * refresh failed, never with the gateway's token; past JWKS_STALE_LIMIT_MS the kept keys are
 * no longer used (`keys_unavailable`). Real TLS sockets; only Date is faked, to pass jose's max
 * age and cooldown and the backoff.
 */

/** The JWKS server: what it publishes and how it answers, and how often it was asked. */
const bench = useJwksBench();
const fetches = () => bench.jwks.requests.length;
/** The cluster's signing keys (RS256); none is published until a test says so. */
const [k1, k2] = await signingKeys("k1", "k2");

/** The gateway pod's own token, sent with every fetch; the server wants it. */
const GATEWAY_TOKEN = `eyJhbGciOiJSUzI1NiJ9.${"g".repeat(40)}.${"gatewaySig".repeat(6)}`;
const tokenFile = () => join(bench.dir, "token");
const config = () => bench.config({ jwksTokenFile: tokenFile() });
const advance = (ms: number) => vi.setSystemTime(Date.now() + ms);
/** How the API server answers mid-upgrade, and with a 200 that is no key set. */
const ANSWER_500 = { status: 500, body: "etcdserver: leader changed" };
const NOT_A_JWKS = { status: 200, body: '{"kind":"Status"}' };

beforeEach(async () => {
  await writeFile(tokenFile(), GATEWAY_TOKEN);
  bench.jwks.requiredToken = GATEWAY_TOKEN;
  vi.useFakeTimers({ toFake: ["Date"] });
});
afterEach(async () => {
  await rm(tokenFile(), { force: true });
});

describe("jwksUri: a failed refresh keeps the keys last fetched", () => {
  it("500 and connection refused past the max age: known keys still verify, one warning a minute, no token logged", async () => {
    bench.jwks.publish(k1);
    const { logger, lines, records } = capturingLogger();
    const warnings = () =>
      records.filter(
        (r) =>
          r.msg ===
          "callers.kubernetes: the JWKS refresh failed; verifying with the keys last fetched",
      );
    const verifier = createServiceAccountVerifier(config(), {
      logger,
      extraCaCertsFile: undefined,
    });
    const callerTokens: string[] = [];
    const byKey = async (key: SigningKey) => {
      const jwt = await serviceAccountToken(key);
      callerTokens.push(jwt);
      return jwt;
    };
    try {
      expect(await verifier.verify(await byKey(k1))).toMatchObject({ ok: true });
      expect(fetches()).toBe(1);

      // The API server goes down for an upgrade: jose's refresh at max age gets a 500.
      bench.jwks.failure = ANSWER_500;
      advance(JWKS_MAX_AGE_MS + 1_000);
      expect(await verifier.verify(await byKey(k1))).toMatchObject({
        ok: true,
        caller: { kind: "serviceAccount", namespace: "payments", name: "billing-client" },
      });
      expect(fetches()).toBe(2);
      expect(warnings()).toEqual([
        expect.objectContaining({
          msg: "callers.kubernetes: the JWKS refresh failed; verifying with the keys last fetched",
          keysAgeSeconds: (JWKS_MAX_AGE_MS + 1_000) / 1000,
          staleLimitSeconds: JWKS_STALE_LIMIT_MS / 1000,
          problem: "answered 500",
        }),
      ]);

      // An unknown kid still makes jose try a refetch after its cooldown; it fails too, so the
      // kid may name a key published during the outage: the keys are unavailable for it (see
      // service-account-new-key-during-outage.test.ts). The minute is not over: no second
      // warning about the refresh.
      advance(JWKS_COOLDOWN_MS + 1_000);
      expect(await verifier.verify(await byKey(k2))).toMatchObject({
        ok: false,
        reason: "keys_unavailable",
      });
      expect(fetches()).toBe(3);
      expect(await verifier.verify(await byKey(k1))).toMatchObject({ ok: true });
      expect(warnings()).toHaveLength(1);

      // Now nothing listens: connection refused, the kept keys still verify.
      await bench.jwks.stopListening();
      advance(JWKS_MAX_AGE_MS + 1_000);
      expect(await verifier.verify(await byKey(k1))).toMatchObject({ ok: true });
      expect(warnings()).toHaveLength(2);
      expect(warnings()[1]).toMatchObject({
        keysAgeSeconds: (2 * JWKS_MAX_AGE_MS + JWKS_COOLDOWN_MS + 3_000) / 1000,
        problem: expect.stringContaining("ECONNREFUSED"),
      });
      expect(fetches()).toBe(3);

      // The API server is back, with k2: the next refresh brings it.
      await bench.jwks.listen();
      bench.jwks.failure = undefined;
      bench.jwks.publish(k1, k2);
      advance(JWKS_MAX_AGE_MS + 1_000);
      expect(await verifier.verify(await byKey(k2))).toMatchObject({ ok: true });
      expect(fetches()).toBe(4);
      expect(records.at(-1)).toMatchObject({
        level: "info",
        msg: "callers.kubernetes: the JWKS refresh succeeded again; the keys are current",
      });
      expect(warnings()).toHaveLength(2);
    } finally {
      await verifier.close();
    }
    const text = lines.join("");
    for (const secret of [GATEWAY_TOKEN, ...callerTokens]) {
      expect(text).not.toContain(secret.split(".")[1]);
      expect(text).not.toContain(secret.split(".")[2]);
    }
  });

  it("keys that cannot be refreshed for longer than the stale limit are refused as keys_unavailable", async () => {
    bench.jwks.publish(k1);
    const { logger, records } = capturingLogger();
    const verifier = createServiceAccountVerifier(config(), {
      logger,
      extraCaCertsFile: undefined,
    });
    const fetchedAt = Date.now();
    try {
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      bench.jwks.failure = ANSWER_500;
      // A minute short of the limit the kept keys still count…
      vi.setSystemTime(fetchedAt + JWKS_STALE_LIMIT_MS - 60_000);
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(fetches()).toBe(2);

      // …past it (at jose's next refresh) they do not: the keys are unavailable, which is no
      // fault of the caller's, and the log says why.
      vi.setSystemTime(fetchedAt + JWKS_STALE_LIMIT_MS + JWKS_MAX_AGE_MS);
      expect(await verifier.verify(await serviceAccountToken(k1))).toEqual({
        ok: false,
        reason: "keys_unavailable",
        message: "the cluster's service-account signing keys could not be loaded",
      });
      expect(fetches()).toBe(3);
      expect(records.at(-1)).toMatchObject({
        level: "warn",
        msg: "callers.kubernetes: the cluster's signing keys could not be loaded",
        err: {
          message:
            "the JWKS refresh failed (answered 500) and the keys fetched 24 h 10 min ago are past the 24 h limit for keys that cannot be refreshed",
        },
      });

      // Within the backoff nothing is fetched; after it, a server that works again admits.
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({
        reason: "keys_unavailable",
      });
      expect(fetches()).toBe(3);
      bench.jwks.failure = undefined;
      advance(JWKS_RETRY_AFTER_FAILURE_MS + 1_000);
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(fetches()).toBe(4);
      expect(records.at(-1)).toMatchObject({
        level: "info",
        msg: "callers.kubernetes: the JWKS refresh succeeded again; the keys are current",
      });
    } finally {
      await verifier.close();
    }
  });
});

describe("the JWKS fetch layers", () => {
  let agent: Agent;
  let fetchJwks: FetchImplementation;
  const options = () => ({
    method: "GET" as const,
    redirect: "manual" as const,
    headers: new Headers({ accept: "application/json" }),
    signal: AbortSignal.timeout(5_000),
  });
  const keysIn = async (response: Response) =>
    ((await response.json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);

  beforeEach(async () => {
    agent = new Agent({ connect: { ca: bench.jwks.caPem } });
    const token = { read: async () => GATEWAY_TOKEN };
    fetchJwks = withLastGoodKeys(withFailureBackoff(createJwksFetch(agent, token)));
  });
  afterEach(async () => {
    await agent.close();
  });

  it("before any good fetch a failure goes through, and the backoff fails at once without fetching", async () => {
    bench.jwks.failure = ANSWER_500;
    expect((await fetchJwks(bench.jwks.uri, options())).status).toBe(500);
    await expect(fetchJwks(bench.jwks.uri, options())).rejects.toThrow(
      "the last JWKS fetch failed (answered 500); the next is allowed in 5 s",
    );
    expect(fetches()).toBe(1);
    bench.jwks.failure = undefined;
    bench.jwks.publish(k1);
    advance(JWKS_RETRY_AFTER_FAILURE_MS);
    const response = await fetchJwks(bench.jwks.uri, options());
    expect(response.status).toBe(200);
    expect(await keysIn(response)).toEqual(["k1"]);
    expect(fetches()).toBe(2);
  });

  it("a 200 that is not a JWKS is a failure: the kept keys answer, and during the backoff without a fetch", async () => {
    bench.jwks.publish(k1);
    expect(await keysIn(await fetchJwks(bench.jwks.uri, options()))).toEqual(["k1"]);
    bench.jwks.failure = NOT_A_JWKS;
    bench.jwks.publish(k2);
    const kept = await fetchJwks(bench.jwks.uri, options());
    expect(kept.status).toBe(200);
    expect(await keysIn(kept)).toEqual(["k1"]);
    expect(fetches()).toBe(2);
    // Within JWKS_RETRY_AFTER_FAILURE_MS: the kept keys, nothing sent.
    bench.jwks.failure = undefined;
    expect(await keysIn(await fetchJwks(bench.jwks.uri, options()))).toEqual(["k1"]);
    expect(fetches()).toBe(2);
    advance(JWKS_RETRY_AFTER_FAILURE_MS);
    expect(await keysIn(await fetchJwks(bench.jwks.uri, options()))).toEqual(["k2"]);
    expect(fetches()).toBe(3);
  });
});
