/**
 * ES256 signatures are made as DER and rewritten as r || s (client-auth/jws.ts: Node 24's own
 * P1363 path costs a second signature). Every signature the rewrite makes must verify — with
 * node:crypto's P1363 verifier and with jose, what a resource server or an authorization server
 * runs — including the ~1/128 whose r or s has a leading zero byte (shorter in DER) and the
 * ~1/2 whose DER integer needs a zero byte in front. Anything but OpenSSL's shape is refused.
 */
import { generateKeyPairSync, sign, verify } from "node:crypto";
import { compactVerify } from "jose";
import { describe, expect, it } from "vitest";
import { ecdsaDerToJose, jwsSigner, signJws } from "../../../src/token/client-auth/jws.js";

const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });

describe("ES256 signatures (DER rewritten as r || s)", () => {
  it("20,000 signatures are 64 bytes and verify as IEEE P1363, short r and s included", () => {
    const signer = jwsSigner(privateKey, "ES256");
    let shortHalves = 0;
    for (let i = 0; i < 20_000; i++) {
      const input = Buffer.from(`header.payload-${i}`);
      const signature = signer(input);
      expect(signature.length).toBe(64);
      if (signature[0] === 0 || signature[32] === 0) shortHalves++;
      const ok = verify("sha256", input, { key: publicKey, dsaEncoding: "ieee-p1363" }, signature);
      if (!ok) throw new Error(`signature ${i} does not verify: ${signature.toString("hex")}`);
      // The rewrite itself served (not the fallback to Node's P1363 path).
      if (i % 100 === 0)
        expect(ecdsaDerToJose(sign("sha256", input, privateKey), 32)).toBeDefined();
    }
    // Expected ~156 (2 × 20,000 / 256): the padding path ran.
    expect(shortHalves).toBeGreaterThan(50);
  });

  it("a compact JWS made with it verifies with jose", async () => {
    for (let i = 0; i < 200; i++) {
      const jws = signJws({ alg: "ES256", typ: "JWT" }, { i }, privateKey, "ES256");
      const { payload, protectedHeader } = await compactVerify(jws, publicKey);
      expect(protectedHeader.alg).toBe("ES256");
      expect(JSON.parse(Buffer.from(payload).toString())).toEqual({ i });
    }
  });

  it("refuses any DER shape but a SEQUENCE of two INTEGERs that fit", () => {
    const int = (bytes: number[]) => [0x02, bytes.length, ...bytes];
    const seq = (...parts: number[][]) => Buffer.from([0x30, parts.flat().length, ...parts.flat()]);
    const r = Array.from({ length: 32 }, (_, i) => i + 1);
    expect(ecdsaDerToJose(seq(int(r), int(r)), 32)?.length).toBe(64);
    expect(ecdsaDerToJose(seq(int([0, 0x80, ...r.slice(1)]), int([5])), 32)?.subarray(63)[0]).toBe(
      5,
    );
    const bad = [
      Buffer.from([0x31, 4, 2, 1, 1, 2, 1, 1]), // not a SEQUENCE
      Buffer.from([0x30, 9, 2, 1, 1, 2, 1, 1]), // length disagrees
      seq(int(r)), // one INTEGER
      seq(int(r), int(r), int([1])), // three
      seq(int([...r, 7]), int(r)), // 33 bytes without a leading zero
      seq([0x04, 1, 1], int(r)), // an OCTET STRING
      seq([0x02, 0], int(r)), // an empty INTEGER
    ];
    for (const der of bad) expect(ecdsaDerToJose(der, 32)).toBeUndefined();
  });
});
