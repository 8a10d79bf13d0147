import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { fingerprint } from "../../src/base/fingerprint.js";
import type { KubernetesCallersConfig } from "../../src/callers/caller-types.js";
import { createJwksSource, JWKS_COOLDOWN_MS } from "../../src/callers/jwks-source.js";
import { createServiceAccountVerifier } from "../../src/callers/service-account.js";
import { ConfigError } from "../../src/errors.js";
import { capturingLogger, serviceAccountToken, signingKey, signingKeys } from "./helpers.js";
import { useJwksBench } from "./support/jwks-server.js";

/**
 * `callers.kubernetes.jwksTokenFile`: the API server serves /openid/v1/jwks to authenticated
 * service accounts, not to anonymous clients. This server does the same over real TLS: 401
 * without `Authorization: Bearer <the token it accepts now>`, the JWKS with it. The token file
 * is read at every fetch, so a rotated token is what the next fetch sends.
 */

/** The JWKS server: the keys it publishes, the one token it accepts, what it was sent. */
const bench = useJwksBench();
const seen = () => bench.jwks.authorizations();
/** The cluster's signing keys (RS256); none is published until a test says so. */
const [k1, k2, k3] = await signingKeys("k1", "k2", "k3");

/** Two service-account tokens of the gateway's own pod, as the kubelet would rotate them. */
const TOKEN_A = `eyJhbGciOiJSUzI1NiJ9.${"a".repeat(40)}.${"sigA".repeat(12)}`;
const TOKEN_B = `eyJhbGciOiJSUzI1NiJ9.${"b".repeat(40)}.${"sigB".repeat(12)}`;

const tokenFile = () => join(bench.dir, "token");
/** Let Date (jose's cooldown clock) pass the cooldown; sockets and TLS keep real time. */
const afterCooldown = () => vi.setSystemTime(Date.now() + JWKS_COOLDOWN_MS + 1_000);

afterEach(async () => {
  await rm(tokenFile(), { force: true });
});

describe("jwksTokenFile: the JWKS fetch presents a bearer token", () => {
  it("without it the server's 401 refuses every service account; with it the same token passes", async () => {
    bench.jwks.publish(k1);
    bench.jwks.requiredToken = TOKEN_A;
    await writeFile(tokenFile(), `${TOKEN_A}\n`); // a Secret's trailing newline is not the token's
    const jwt = await serviceAccountToken(k1);
    const { logger, lines, records } = capturingLogger();

    const anonymous = createServiceAccountVerifier(bench.config(), {
      logger,
      extraCaCertsFile: undefined,
    });
    try {
      expect(await anonymous.verify(jwt)).toEqual({
        ok: false,
        reason: "keys_unavailable",
        message: "the cluster's service-account signing keys could not be loaded",
      });
    } finally {
      await anonymous.close();
    }
    expect(seen()).toEqual([undefined]);
    // The log says what to change, not only that the keys are missing.
    expect(records.at(-1)).toMatchObject({
      level: "warn",
      err: {
        message: expect.stringContaining(
          "answered 401 to an anonymous fetch: the API server's /openid/v1/jwks serves authenticated service accounts; set callers.kubernetes.jwksTokenFile",
        ),
      },
    });

    const authenticated = createServiceAccountVerifier(
      bench.config({ jwksTokenFile: tokenFile() }),
      {
        logger,
        extraCaCertsFile: undefined,
      },
    );
    try {
      expect(await authenticated.verify(jwt)).toMatchObject({
        ok: true,
        caller: { kind: "serviceAccount", namespace: "payments", name: "billing-client" },
      });
    } finally {
      await authenticated.close();
    }
    expect(seen()).toEqual([undefined, `Bearer ${TOKEN_A}`]);
    expect(lines.join("")).not.toContain(TOKEN_A.split(".")[2]);
  });

  it("a token the server refuses: the log names 401 or 403 and the token's fingerprint, never the token", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    bench.jwks.publish(k1);
    bench.jwks.requiredToken = TOKEN_B;
    bench.jwks.forbiddenToken = TOKEN_B;
    await writeFile(tokenFile(), TOKEN_A);
    const { logger, lines, records } = capturingLogger();
    const verifier = createServiceAccountVerifier(bench.config({ jwksTokenFile: tokenFile() }), {
      logger,
      extraCaCertsFile: undefined,
    });
    const jwt = await serviceAccountToken(k1);
    try {
      expect(await verifier.verify(jwt)).toMatchObject({ ok: false, reason: "keys_unavailable" });
      expect(records.at(-1)).toMatchObject({
        level: "warn",
        err: {
          message: `the JWKS server answered 401 to the token of callers.kubernetes.jwksTokenFile (fingerprint ${fingerprint(TOKEN_A)}): not valid there (expired, or not its audience)`,
        },
      });
      // A failed fetch holds the next one back (an outage must not be a fetch per caller)…
      await writeFile(tokenFile(), TOKEN_B);
      const warnings = records.length;
      expect(await verifier.verify(jwt)).toMatchObject({ ok: false, reason: "keys_unavailable" });
      expect(seen()).toEqual([`Bearer ${TOKEN_A}`]);
      expect(records.length).toBe(warnings); // and the warning comes once a minute
      // …for JWKS_RETRY_AFTER_FAILURE_MS; then it tries again, with the file as it is now.
      vi.setSystemTime(Date.now() + 61_000);
      expect(await verifier.verify(jwt)).toMatchObject({ ok: false, reason: "keys_unavailable" });
      expect(records.at(-1)).toMatchObject({
        refusedCallers: 2,
        err: {
          message: expect.stringMatching(
            /answered 403 to the token .*\(fingerprint [0-9a-f]{8}\): its identity may not read the keys/,
          ),
        },
      });
      expect(seen()).toEqual([`Bearer ${TOKEN_A}`, `Bearer ${TOKEN_B}`]);
    } finally {
      await verifier.close();
    }
    const text = lines.join("");
    for (const token of [TOKEN_A, TOKEN_B]) expect(text).not.toContain(token.split(".")[2]);
  });

  it("a rotated token file: the next fetch (an unknown kid after the cooldown) sends the new token", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    bench.jwks.publish(k1);
    bench.jwks.requiredToken = TOKEN_A;
    await writeFile(tokenFile(), TOKEN_A);
    const verifier = createServiceAccountVerifier(bench.config({ jwksTokenFile: tokenFile() }), {
      extraCaCertsFile: undefined,
    });
    try {
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(seen()).toEqual([`Bearer ${TOKEN_A}`]);

      // The kubelet rewrites the projected token; the API server stops accepting the old one.
      await writeFile(tokenFile(), TOKEN_B);
      bench.jwks.requiredToken = TOKEN_B;
      bench.jwks.publish(k1, k2);
      const byK2 = await serviceAccountToken(k2);
      // Within the cooldown the unknown kid fetches nothing (and the file is not read).
      expect(await verifier.verify(byK2)).toMatchObject({ ok: false });
      expect(seen()).toHaveLength(1);

      afterCooldown();
      expect(await verifier.verify(byK2)).toMatchObject({ ok: true });
      expect(seen()).toEqual([`Bearer ${TOKEN_A}`, `Bearer ${TOKEN_B}`]);
    } finally {
      await verifier.close();
    }
  });

  it("a token file that cannot be read later keeps the last token, warns once, and never logs it", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    bench.jwks.publish(k1);
    bench.jwks.requiredToken = TOKEN_A;
    await writeFile(tokenFile(), TOKEN_A);
    const { logger, lines, records } = capturingLogger();
    const verifier = createServiceAccountVerifier(bench.config({ jwksTokenFile: tokenFile() }), {
      logger,
      extraCaCertsFile: undefined,
    });
    const warnings = () => records.filter((r) => r.level === "warn");
    try {
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });

      await rm(tokenFile());
      bench.jwks.publish(k1, k2);
      afterCooldown();
      expect(await verifier.verify(await serviceAccountToken(k2))).toMatchObject({ ok: true });
      // Emptied mid-rotation: not a token either; still the last good one, still one warning.
      await writeFile(tokenFile(), "");
      bench.jwks.publish(k1, k2, k3);
      afterCooldown();
      expect(await verifier.verify(await serviceAccountToken(k3))).toMatchObject({ ok: true });
      expect(seen()).toEqual(Array(3).fill(`Bearer ${TOKEN_A}`));
      expect(warnings()).toHaveLength(1);
      expect(warnings()[0]).toMatchObject({
        file: tokenFile(),
        problem: "expected a readable token file, found no such file",
        fingerprint: expect.stringMatching(/^[0-9a-f]{8}$/),
      });

      // Back: the new token goes out, and the log says so (by fingerprint).
      await writeFile(tokenFile(), TOKEN_B);
      bench.jwks.requiredToken = TOKEN_B;
      afterCooldown();
      expect(await verifier.verify(await serviceAccountToken(k3, { name: "other" }))).toMatchObject(
        { ok: true },
      );
      // k3 is known: nothing was fetched. A made-up kid makes the fetch happen.
      const stranger = await signingKey("made-up");
      expect(await verifier.verify(await serviceAccountToken(stranger))).toMatchObject({
        ok: false,
      });
      expect(seen().at(-1)).toBe(`Bearer ${TOKEN_B}`);
      expect(records.some((r) => String(r.msg).includes("is readable again"))).toBe(true);
      expect(warnings()).toHaveLength(1);
    } finally {
      await verifier.close();
    }
    const text = lines.join("");
    for (const token of [TOKEN_A, TOKEN_B]) {
      expect(text).not.toContain(token.split(".")[1]);
      expect(text).not.toContain(token.split(".")[2]);
    }
  });

  it("refuses at start a missing, empty or malformed token file, and an http:// jwksUri, naming the field", async () => {
    const refusal = (extra: Partial<KubernetesCallersConfig>) => {
      try {
        createJwksSource(bench.config(extra), { extraCaCertsFile: undefined });
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as ConfigError).issues;
      }
      throw new Error("expected a ConfigError");
    };
    expect(refusal({ jwksTokenFile: tokenFile() })).toEqual([
      {
        path: "callers.kubernetes.jwksTokenFile",
        message: `expected a readable token file, found no such file (${tokenFile()})`,
      },
    ]);
    await writeFile(tokenFile(), " \n");
    expect(refusal({ jwksTokenFile: tokenFile() })).toEqual([
      {
        path: "callers.kubernetes.jwksTokenFile",
        message: `expected a bearer token, found an empty file (${tokenFile()})`,
      },
    ]);
    await writeFile(tokenFile(), `${TOKEN_A}\n${TOKEN_B}\n`);
    const twoLines = refusal({ jwksTokenFile: tokenFile() });
    expect(twoLines).toEqual([
      {
        path: "callers.kubernetes.jwksTokenFile",
        message: expect.stringContaining(
          "expected a bearer token, found text that is not one token",
        ),
      },
    ]);
    expect(JSON.stringify(twoLines)).not.toContain(TOKEN_A.split(".")[2]);

    await writeFile(tokenFile(), TOKEN_A);
    expect(
      refusal({ jwksTokenFile: tokenFile(), jwksUri: bench.jwks.uri.replace("https:", "http:") }),
    ).toEqual([
      {
        path: "callers.kubernetes.jwksTokenFile",
        message: expect.stringContaining("not https://: the token would travel in clear"),
      },
    ]);
  });
});
