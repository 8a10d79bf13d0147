/**
 * Issue #24: `dpop.keyFile` holds the key replicas share. Every supported kind signs proofs
 * that jose verifies; keys that don't fit the algorithm, or are too weak, are refused at load
 * with a message that names the file and never the key.
 */
import { readFile } from "node:fs/promises";
import { calculateJwkThumbprint, decodeProtectedHeader, EmbeddedJWK, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DpopAlgorithm, jwkThumbprint, loadDpopKey } from "../../src/token/dpop/index.js";
import { createDpopKeyDir, type DpopKeyDir, type DpopTestKeyKind } from "../helpers/dpop-keys.js";

let keys: DpopKeyDir;
beforeAll(async () => {
  keys = await createDpopKeyDir();
});
afterAll(() => keys.remove());

const proofOf = (sign: (claims: Record<string, unknown>) => string) =>
  sign({ jti: "j", htm: "GET", htu: "https://x.example/", iat: Math.floor(Date.now() / 1000) });

describe("dpop.keyFile", () => {
  const cases: [DpopTestKeyKind, DpopAlgorithm | undefined, DpopAlgorithm, string][] = [
    ["ec-p256", undefined, "ES256", "EC"],
    ["ec-p256", "ES256", "ES256", "EC"],
    ["rsa-2048", undefined, "RS256", "RSA"],
    ["rsa-2048", "PS256", "PS256", "RSA"],
    ["ed25519", undefined, "EdDSA", "OKP"],
  ];
  for (const [kind, configured, algorithm, kty] of cases) {
    it(`${kind} signs ${algorithm}${configured ? "" : " (inferred)"} proofs jose verifies`, async () => {
      const path = await keys.write(`${kind}-${algorithm}.pem`, kind);
      const key = await loadDpopKey(
        { keyFile: path, algorithm: configured },
        { pollIntervalMs: 0 },
      );
      try {
        expect(key.algorithm).toBe(algorithm);
        expect(key.ephemeral).toBe(false);
        expect(key.publicJwk.kty).toBe(kty);
        expect(key.publicJwk).not.toHaveProperty("d");
        const proof = proofOf(key.sign);
        const { protectedHeader } = await jwtVerify(proof, EmbeddedJWK, {
          typ: "dpop+jwt",
          algorithms: [algorithm],
        });
        // RFC 7638, checked against jose's implementation.
        expect(key.jkt).toBe(await calculateJwkThumbprint(protectedHeader.jwk!));
        expect(jwkThumbprint(key.publicJwk)).toBe(key.jkt);
        expect(key.describe()).toContain(key.jkt);
        expect(key.describe()).not.toContain((await readFile(path, "utf8")).slice(40, 80));
      } finally {
        key.close();
      }
    });
  }

  it("matches RFC 7638 §3.1's example thumbprint", () => {
    const n =
      "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
    expect(jwkThumbprint({ kty: "RSA", n, e: "AQAB" })).toBe(
      "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs",
    );
  });

  const refusals: [DpopTestKeyKind, DpopAlgorithm | undefined, RegExp][] = [
    ["rsa-1024", undefined, /2048 bits or more, found 1024/],
    ["rsa-1024", "PS256", /2048 bits or more, found 1024/],
    ["ec-p384", undefined, /P-256/],
    ["ec-p256", "RS256", /RS256 needs an RSA key, found EC P-256/],
    ["rsa-2048", "ES256", /ES256 needs an EC P-256 key/],
    ["ed25519", "ES256", /ES256 needs an EC P-256 key, found Ed25519/],
    ["ed448", undefined, /Ed25519 key for DPoP, found Ed448/],
    ["rsa-pss-2048", "PS256", /RSA-PSS-restricted/],
  ];
  for (const [kind, algorithm, message] of refusals) {
    it(`refuses ${kind}${algorithm ? ` for ${algorithm}` : ""}`, async () => {
      const path = await keys.write(`bad-${kind}-${algorithm}.pem`, kind);
      const load = loadDpopKey({ keyFile: path, algorithm }, { pollIntervalMs: 0 });
      await expect(load).rejects.toMatchObject({ code: "BP_ERR_CLIENT_KEY", message });
      await expect(load).rejects.toThrow(path);
    });
  }

  it("refuses a file that is no private key, and a missing file", async () => {
    const certLike = await keys.writeText("not-a-key.pem", "-----BEGIN CERTIFICATE-----\nAA\n");
    await expect(loadDpopKey({ keyFile: certLike }, { pollIntervalMs: 0 })).rejects.toMatchObject({
      code: "BP_ERR_CLIENT_KEY",
      message: /not-a-key\.pem does not hold an unencrypted PEM/,
    });
    await expect(
      loadDpopKey({ keyFile: `${keys.dir}/absent.pem` }, { pollIntervalMs: 0 }),
    ).rejects.toMatchObject({
      code: "BP_ERR_SECRET_FILE",
      message: /cannot read dpop\.keyFile .*absent\.pem \(ENOENT\)/,
    });
  });

  it("makes an ephemeral key of the configured algorithm when there is no file", async () => {
    for (const algorithm of ["ES256", "EdDSA", "PS256"] as const) {
      const key = await loadDpopKey({ algorithm });
      try {
        expect(key.ephemeral).toBe(true);
        expect(key.describe()).toMatch(new RegExp(`^dpop: ${algorithm} with an ephemeral`));
        expect(decodeProtectedHeader(proofOf(key.sign)).alg).toBe(algorithm);
      } finally {
        key.close();
      }
    }
    const [a, b] = await Promise.all([loadDpopKey({}), loadDpopKey({})]);
    expect(a.jkt).not.toBe(b.jkt); // per process, per upstream: never the same key
    expect(JSON.stringify(a)).not.toMatch(/"d"/);
  });
});
