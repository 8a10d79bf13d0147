import { describe, expect, it, vi } from "vitest";
import { createServiceAccountVerifier } from "../../src/callers/service-account.js";
import {
  AUDIENCE,
  capturingLogger,
  ISSUER,
  serviceAccountToken,
  signingKey,
  signingKeys,
} from "./helpers.js";
import { useJwksBench } from "./support/jwks-server.js";

/** The API server's /openid/v1/jwks as a test controls it: what it publishes, how often asked. */
const bench = useJwksBench();
const fetches = () => bench.jwks.requests.length;
/** The cluster's signing keys (RS256); none is published until a test says so. */
const [k1, k2] = await signingKeys("k1", "k2");

describe("service-account jwksUri", () => {
  it("fetches the keys over TLS trusting caFile; an unknown kid refetches at most once per 30 s cooldown", async () => {
    // Only Date moves: jose times its cooldown with Date.now, sockets and TLS keep real time.
    vi.useFakeTimers({ toFake: ["Date"] });
    const verifier = createServiceAccountVerifier(bench.config(), { extraCaCertsFile: undefined });
    try {
      bench.jwks.publish(k1);
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(fetches()).toBe(1);

      // The cluster rotates k2 in. Within the cooldown a token under k2 cannot make jose refetch,
      // and neither can a flood of made-up kids.
      bench.jwks.publish(k1, k2);
      const byK2 = await serviceAccountToken(k2);
      expect(await verifier.verify(byK2)).toMatchObject({
        ok: false,
        message: "the service-account token is signed by a key the cluster does not publish",
      });
      const strangers = await Promise.all(
        Array.from({ length: 5 }, (_, i) => signingKey(`made-up-${i}`).then(serviceAccountToken)),
      );
      const results = await Promise.all(strangers.map((jwt) => verifier.verify(jwt)));
      expect(results.every((r) => !r.ok)).toBe(true);
      expect(fetches()).toBe(1);

      // After the cooldown the unknown kid triggers one refetch, which finds k2.
      vi.setSystemTime(Date.now() + 31_000);
      expect(await verifier.verify(await serviceAccountToken(k2))).toMatchObject({ ok: true });
      expect(fetches()).toBe(2);
      expect(await verifier.verify(strangers[0]!)).toMatchObject({ ok: false });
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(fetches()).toBe(2);
    } finally {
      await verifier.close();
    }
  });

  it("an untrusted certificate or a failing key URL refuses tokens and logs why, without the token", async () => {
    bench.jwks.publish(k1);
    const { logger, lines, records } = capturingLogger();
    const untrusting = createServiceAccountVerifier(
      { issuer: ISSUER, audiences: [AUDIENCE], jwksUri: bench.jwks.uri },
      { logger, extraCaCertsFile: undefined },
    );
    const jwt = await serviceAccountToken(k1);
    try {
      expect(await untrusting.verify(jwt)).toEqual({
        ok: false,
        reason: "keys_unavailable",
        message: "the cluster's service-account signing keys could not be loaded",
      });
      expect(fetches()).toBe(0);
      expect(records.at(-1)).toMatchObject({ level: "warn" });
    } finally {
      await untrusting.close();
    }

    bench.jwks.failure = { status: 500 };
    const failing = createServiceAccountVerifier(bench.config(), {
      logger,
      extraCaCertsFile: undefined,
    });
    try {
      expect(await failing.verify(jwt)).toMatchObject({ ok: false, reason: "keys_unavailable" });
      expect(fetches()).toBe(1);
    } finally {
      await failing.close();
    }
    expect(lines.join("")).not.toContain(jwt.split(".")[2]);
  });
});
