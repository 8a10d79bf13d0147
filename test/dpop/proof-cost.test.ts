/**
 * Issue #24: what one proof costs, printed (not asserted: the machine is shared). Compares the
 * signer src/token/dpop uses (node:crypto, header encoded once per key) with the existing
 * private-key-jwt signer (client-auth/jws.ts signJws, header encoded per call) and with jose 6
 * (WebCrypto, loaded lazily as a sidecar without DPoP would). DPOP_BENCH_N=20000 for steadier
 * figures.
 */
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { signJws } from "../../src/token/client-auth/jws.js";
import { createDpop, type DpopAlgorithm } from "../../src/token/dpop/index.js";

const N = Number(process.env.DPOP_BENCH_N ?? 1000);
const URL_ = "https://api.example/v1/items";
const TOKEN = "x".repeat(800);

/** CPU µs per call (user + system), after a warm-up; async calls are awaited one by one. */
async function cost(fn: () => unknown): Promise<number> {
  for (let i = 0; i < Math.min(500, N); i++) await fn();
  const start = process.cpuUsage();
  for (let i = 0; i < N; i++) await fn();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / N;
}

const claims = () => ({
  jti: randomUUID(),
  htm: "GET",
  htu: URL_,
  iat: Math.floor(Date.now() / 1000),
  ath: "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo",
});

describe("proof cost", () => {
  it("prints µs per proof: src/token/dpop vs jws.ts signJws vs jose", async () => {
    const rows: [string, number][] = [];
    const dpop = await createDpop({});
    try {
      rows.push([
        "dpop.proofFor ES256 (node:crypto, cached header)",
        await cost(() => dpop.proofFor("GET", URL_, TOKEN)),
      ]);

      rows.push([
        "dpop key.sign ES256 (cached header, claims only)",
        await cost(() => dpop.key.sign(claims())),
      ]);

      const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
      const { kty, crv, x, y } = publicKey.export({ format: "jwk" });
      const header = { typ: "dpop+jwt", alg: "ES256", jwk: { crv, kty, x, y } };
      rows.push([
        "jws.ts signJws ES256 (header per call)",
        await cost(() => signJws(header, claims(), privateKey, "ES256")),
      ]);

      const started = performance.now();
      const jose = await import("jose");
      const importMs = performance.now() - started;
      const encoder = new TextEncoder();
      rows.push([
        "jose CompactSign ES256 (KeyObject)",
        await cost(() =>
          new jose.CompactSign(encoder.encode(JSON.stringify(claims())))
            .setProtectedHeader(header)
            .sign(privateKey),
        ),
      ]);
      const cryptoKey = await jose.importJWK(privateKey.export({ format: "jwk" }), "ES256");
      rows.push([
        "jose SignJWT ES256 (CryptoKey)",
        await cost(() => new jose.SignJWT(claims()).setProtectedHeader(header).sign(cryptoKey)),
      ]);

      for (const algorithm of ["EdDSA", "RS256", "PS256"] as DpopAlgorithm[]) {
        const other = await createDpop({ algorithm });
        try {
          rows.push([
            `dpop.proofFor ${algorithm}`,
            await cost(() => other.proofFor("GET", URL_, TOKEN)),
          ]);
        } finally {
          other.close();
        }
      }

      const lines = rows.map(
        ([name, us]) =>
          `  ${name.padEnd(52)} ${us.toFixed(1).padStart(7)} µs  ${Math.round(1e6 / us)
            .toString()
            .padStart(6)} proofs/s per core`,
      );
      console.log(
        `DPoP proof cost, CPU per proof, n=${N}:\n${lines.join("\n")}\n  (first import("jose") in this worker: ${importMs.toFixed(1)} ms)`,
      );
      for (const [, us] of rows) expect(us).toBeGreaterThan(0);
    } finally {
      dpop.close();
    }
  });
});
