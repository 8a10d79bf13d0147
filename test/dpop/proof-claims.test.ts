/**
 * Issue #24: a proof is a JWT that an independent implementation (jose) verifies with the key
 * in its own header, carrying exactly the claims RFC 9449 §4.2 lists.
 */
import { calculateJwkThumbprint, decodeProtectedHeader, EmbeddedJWK, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  accessTokenHash,
  createDpop,
  createProof,
  type Dpop,
  loadDpopKey,
  normaliseHtu,
} from "../../src/token/dpop/index.js";

let dpop: Dpop;
beforeAll(async () => {
  dpop = await createDpop({});
});
afterAll(() => dpop.close());

describe("a DPoP proof", () => {
  it("is a dpop+jwt signed by the ephemeral P-256 key it carries as a public jwk", async () => {
    const proof = dpop.proofFor("GET", "https://api.example/v1/items");
    const { payload, protectedHeader } = await jwtVerify(proof, EmbeddedJWK, {
      typ: "dpop+jwt",
      algorithms: ["ES256"],
    });
    expect(protectedHeader).toEqual({
      typ: "dpop+jwt",
      alg: "ES256",
      jwk: { crv: "P-256", kty: "EC", x: expect.any(String), y: expect.any(String) },
    });
    expect(Object.keys(payload).sort()).toEqual(["htm", "htu", "iat", "jti"]);
    expect(payload.htm).toBe("GET");
    expect(payload.htu).toBe("https://api.example/v1/items");
    expect(Math.abs((payload.iat as number) - Date.now() / 1000)).toBeLessThan(5);
    expect(dpop.algorithm).toBe("ES256");
    expect(dpop.jkt).toBe(await calculateJwkThumbprint(protectedHeader.jwk!));
  });

  it("has a fresh jti of at least 96 random bits every time", () => {
    const jtis = new Set<string>();
    for (let i = 0; i < 500; i++) {
      const proof = dpop.proofFor("GET", "https://api.example/");
      const jti = JSON.parse(Buffer.from(proof.split(".")[1]!, "base64url").toString()).jti;
      expect(jti.replace(/-/g, "")).toMatch(/^[0-9a-f]{32}$/); // a v4 UUID: 122 random bits
      jtis.add(jti);
    }
    expect(jtis.size).toBe(500);
  });

  it("binds the access token with ath = base64url(SHA-256(token))", async () => {
    const token = "eyJ.token-value.x";
    const { payload } = await jwtVerify(
      dpop.proofFor("POST", "https://api.example/x", token),
      EmbeddedJWK,
    );
    // RFC 9449 §7.1's example token and ath.
    expect(accessTokenHash("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU")).toBe(
      "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo",
    );
    expect(payload.ath).toBe(accessTokenHash(token));
    // A new token is hashed anew (the facade caches the last one).
    const { payload: next } = await jwtVerify(
      dpop.proofFor("POST", "https://api.example/x", "other"),
      EmbeddedJWK,
    );
    expect(next.ath).toBe(accessTokenHash("other"));
  });

  it("names the target URI without query and fragment, normalised (RFC 9449 §4.3)", () => {
    expect(normaliseHtu("https://API.Example:443/a/./b/../c?x=1#frag")).toBe(
      "https://api.example/a/c",
    );
    expect(normaliseHtu(new URL("http://127.0.0.1:8080/p%2Fq?x"))).toBe(
      "http://127.0.0.1:8080/p%2Fq",
    );
    expect(() => normaliseHtu("ftp://example/x")).toThrow(/http/);
  });

  it("carries the origin's nonce once a server sent one, and only to that origin", async () => {
    expect(dpop.noteResponse("https://rs.example/a", 200, { "dpop-nonce": "n-1" })).toBe(false);
    const claims = (proof: string) =>
      JSON.parse(Buffer.from(proof.split(".")[1]!, "base64url").toString());
    expect(claims(dpop.proofFor("GET", "https://rs.example/b?q")).nonce).toBe("n-1");
    expect(claims(dpop.proofFor("GET", "https://other.example/b")).nonce).toBeUndefined();
  });

  it("is made by createProof for any key, with the claims asked for", async () => {
    const key = await loadDpopKey({ algorithm: "EdDSA" });
    try {
      const proof = createProof(
        key,
        { htm: "PUT", htu: "https://x.example/y?z", nonce: "abc", accessToken: "t" },
        1_700_000_000_500,
      );
      expect(decodeProtectedHeader(proof).alg).toBe("EdDSA");
      const { payload } = await jwtVerify(proof, EmbeddedJWK, {
        currentDate: new Date(1_700_000_000_500),
      });
      expect(payload).toMatchObject({
        htm: "PUT",
        htu: "https://x.example/y",
        iat: 1_700_000_000,
        nonce: "abc",
        ath: accessTokenHash("t"),
      });
      expect(() => createProof(key, { htm: "GE T", htu: "https://x.example/" })).toThrow();
    } finally {
      key.close();
    }
  });

  it("says Authorization: DPoP <token>, refusing a token that could break the header", () => {
    expect(dpop.authorization("abc.def")).toBe("DPoP abc.def");
    expect(() => dpop.authorization("abc\r\nx: y")).toThrow();
  });
});
