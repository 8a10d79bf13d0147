import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { exportSPKI, SignJWT, UnsecuredJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Authentication } from "../../src/callers/caller-types.js";
import {
  createServiceAccountVerifier,
  type ServiceAccountVerifier,
} from "../../src/callers/service-account.js";
import { ConfigError } from "../../src/errors.js";
import {
  AUDIENCE,
  ISSUER,
  jwks,
  type SigningKey,
  serviceAccountToken,
  signingKey,
  tempDir,
} from "./helpers.js";

const NOW_S = 1_790_000_000;
let key: SigningKey;
let ecKey: SigningKey;
let impostor: SigningKey;
let verifier: ServiceAccountVerifier;
let dir: string;
let remove: () => Promise<void>;

beforeAll(async () => {
  ({ dir, remove } = await tempDir());
  [key, ecKey, impostor] = await Promise.all([
    signingKey("k1"),
    signingKey("k2", "ES256"),
    signingKey("k1"), // same kid, different key
  ]);
  await writeFile(join(dir, "jwks.json"), jwks(key, ecKey));
  verifier = createServiceAccountVerifier(
    { issuer: ISSUER, audiences: [AUDIENCE], jwksFile: join(dir, "jwks.json") },
    { now: () => NOW_S * 1000, pollIntervalMs: 0 },
  );
});
afterAll(async () => {
  await verifier.close();
  await remove();
});

function token(options: Parameters<typeof serviceAccountToken>[1] = {}, by = key) {
  return serviceAccountToken(by, { nowSeconds: NOW_S, ...options });
}

async function rejected(jwt: string): Promise<string> {
  const result = await verifier.verify(jwt);
  expect(result).toMatchObject({ ok: false, reason: "invalid_token" });
  const { message } = result as Authentication & { ok: false };
  // No part of the token (header, payload or signature) ever appears in a message.
  for (const part of jwt.split(".")) if (part.length > 8) expect(message).not.toContain(part);
  return message;
}

describe("service-account token verification", () => {
  it("accepts a good RS256 or ES256 token as namespace/name, until its exp", async () => {
    expect(await verifier.verify(await token())).toEqual({
      ok: true,
      caller: { kind: "serviceAccount", namespace: "payments", name: "billing-client" },
      expiresAtMs: (NOW_S + 3600) * 1000,
    });
    const ec = await verifier.verify(
      await token({ namespace: "ops", name: "cron.nightly" }, ecKey),
    );
    expect(ec).toMatchObject({ ok: true, caller: { namespace: "ops", name: "cron.nightly" } });
  });

  it("accepts aud as a string, and a token without the kubernetes.io claim", async () => {
    const jwt = await token({ claims: { aud: AUDIENCE, "kubernetes.io": undefined } });
    expect(await verifier.verify(jwt)).toMatchObject({ ok: true });
  });

  it("wrong issuer or audience", async () => {
    expect(await rejected(await token({ claims: { iss: "https://other.example" } }))).toBe(
      `the service-account token's issuer is not ${ISSUER}`,
    );
    expect(await rejected(await token({ claims: { aud: ["vault", "api"] } }))).toBe(
      "the service-account token's audience is not one of [bearer-proxy]",
    );
  });

  it("expired beyond the 5 s leeway; within it still accepted", async () => {
    expect(await rejected(await token({ claims: { exp: NOW_S - 6 } }))).toBe(
      "the service-account token has expired",
    );
    expect(await verifier.verify(await token({ claims: { exp: NOW_S - 4 } }))).toMatchObject({
      ok: true,
    });
  });

  it("nbf in the future", async () => {
    expect(await rejected(await token({ claims: { nbf: NOW_S + 60 } }))).toBe(
      "the service-account token is not valid yet (nbf)",
    );
  });

  it("exp and sub are required", async () => {
    expect(await rejected(await token({ claims: { exp: undefined } }))).toBe(
      'the service-account token has no "exp" claim',
    );
    expect(await rejected(await token({ claims: { sub: undefined } }))).toBe(
      'the service-account token has no "sub" claim',
    );
  });

  it("alg none is refused", async () => {
    const unsecured = new UnsecuredJWT({
      iss: ISSUER,
      aud: AUDIENCE,
      sub: "system:serviceaccount:payments:billing-client",
      exp: NOW_S + 60,
    }).encode();
    expect(await rejected(unsecured)).toBe(
      "the service-account token's algorithm (none) is not allowed",
    );
  });

  it("HS256 keyed with the cluster's public key (algorithm confusion) is refused", async () => {
    const secret = new TextEncoder().encode(await exportSPKI(key.publicKey));
    const forged = await new SignJWT({
      iss: ISSUER,
      aud: AUDIENCE,
      sub: "system:serviceaccount:kube-system:admin",
      exp: NOW_S + 60,
    })
      .setProtectedHeader({ alg: "HS256", kid: "k1" })
      .sign(secret);
    expect(await rejected(forged)).toBe(
      "the service-account token's algorithm (HS256) is not allowed",
    );
  });

  it("a signature by another key under a published kid does not verify", async () => {
    expect(await rejected(await token({}, impostor))).toBe(
      "the service-account token's signature does not verify",
    );
  });

  it("a kid the cluster does not publish", async () => {
    const stranger = await signingKey("unknown-kid");
    expect(await rejected(await token({}, stranger))).toBe(
      "the service-account token is signed by a key the cluster does not publish",
    );
  });

  it("sub must be system:serviceaccount:<ns>:<name> and agree with the kubernetes.io claim", async () => {
    const sub = "the token's subject is not system:serviceaccount:<namespace>:<name>";
    expect(await rejected(await token({ claims: { sub: "system:node:worker-1" } }))).toBe(sub);
    expect(await rejected(await token({ claims: { sub: "system:serviceaccount:a:b:c" } }))).toBe(
      sub,
    );
    expect(
      await rejected(await token({ claims: { sub: "system:serviceaccount:payments:*" } })),
    ).toBe(sub);
    expect(
      await rejected(
        await token({
          claims: {
            "kubernetes.io": {
              namespace: "kube-system",
              serviceaccount: { name: "billing-client" },
            },
          },
        }),
      ),
    ).toBe('the token\'s "kubernetes.io" namespace does not match its subject');
    expect(
      await rejected(
        await token({
          claims: { "kubernetes.io": { namespace: "payments", serviceaccount: { name: "admin" } } },
        }),
      ),
    ).toBe('the token\'s "kubernetes.io" service account does not match its subject');
  });

  it("something that is not a JWT", async () => {
    expect(await rejected("opaque-token-value")).toBe("the bearer token is not a signed JWT");
  });
});

describe("service-account jwksFile", () => {
  it("a missing or invalid file at start is a ConfigError", async () => {
    const config = { issuer: ISSUER, audiences: [AUDIENCE] };
    expect(() =>
      createServiceAccountVerifier({ ...config, jwksFile: join(dir, "nope.json") }),
    ).toThrow(ConfigError);
    await writeFile(join(dir, "bad.json"), '{"kes": []}');
    expect(() =>
      createServiceAccountVerifier({ ...config, jwksFile: join(dir, "bad.json") }),
    ).toThrow(/not a JSON Web Key Set/);
  });

  it("is re-read on change: a rotated-in key verifies; a broken file keeps the old keys", async () => {
    const file = join(dir, "rotating.json");
    await writeFile(file, jwks(key));
    const rotating = createServiceAccountVerifier(
      { issuer: ISSUER, audiences: [AUDIENCE], jwksFile: file },
      { now: () => NOW_S * 1000, pollIntervalMs: 0 },
    );
    try {
      const byEc = await token({}, ecKey);
      expect(await rotating.verify(byEc)).toMatchObject({ ok: false });
      await writeFile(file, jwks(key, ecKey));
      await rotating.check();
      expect(await rotating.verify(byEc)).toMatchObject({ ok: true });

      await writeFile(file, '{"keys": [');
      await rotating.check();
      expect(await rotating.verify(byEc)).toMatchObject({ ok: true });
      expect(await rotating.verify(await token())).toMatchObject({ ok: true });
    } finally {
      await rotating.close();
    }
  });
});
