/**
 * Issue #33: a proof's claims are a template filled in per request, signed from reused
 * buffers, with the last method, URL and token remembered. Whatever the cache holds, every
 * proof must still be the one its request asks for: jose verifies each with the key in its
 * header, and its claims are exactly the request's.
 */
import { EmbeddedJWK, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accessTokenHash, createDpop, type Dpop } from "../../src/token/dpop/index.js";
import { MAX_NONCE_LENGTH } from "../../src/token/dpop/nonce-store.js";

let dpop: Dpop;
beforeAll(async () => {
  dpop = await createDpop({});
});
afterAll(() => dpop.close());

async function claimsOf(proof: string): Promise<Record<string, unknown>> {
  const { payload } = await jwtVerify(proof, EmbeddedJWK, {
    typ: "dpop+jwt",
    algorithms: ["ES256"],
  });
  return payload;
}

describe("proofs made from the remembered template", () => {
  it("follow every change of method, URL, token and nonce", async () => {
    const requests = [
      ["GET", "https://a.example/x?q=1", "t1"],
      ["GET", "https://a.example/x?q=2", "t1"],
      ["POST", "https://a.example/x?q=2", "t1"],
      ["POST", "https://b.example:8443/y", "t2"],
      ["GET", "https://b.example:8443/y", undefined],
      ["GET", "https://a.example/x?q=1", "t1"],
    ] as const;
    for (const [method, url, token] of requests) {
      const claims = await claimsOf(dpop.proofFor(method, url, token));
      const expected: Record<string, unknown> = {
        htm: method,
        htu: url.replace(/\?.*$/, ""),
        jti: expect.any(String),
        iat: expect.any(Number),
      };
      if (token !== undefined) expected.ath = accessTokenHash(token);
      expect(claims).toEqual(expected);
    }
    // A URL object is taken as it is, beside the remembered string.
    expect((await claimsOf(dpop.proofFor("PUT", new URL("http://c.example/z#f"), "t3"))).htu).toBe(
      "http://c.example/z",
    );
    expect((await claimsOf(dpop.proofFor("GET", "https://a.example/x?q=1", "t1"))).htm).toBe("GET");
  });

  it("carry a nonce as long as a nonce may be, and a URL that had to be escaped", async () => {
    const nonce = `n${"~".repeat(MAX_NONCE_LENGTH - 1)}`;
    expect(dpop.noteResponse("https://long.example/p", 200, { "dpop-nonce": nonce })).toBe(false);
    const url = `https://long.example/${"seg/".repeat(300)}a"b\\c%22?x=1`;
    const claims = await claimsOf(dpop.proofFor("GET", url, "t".repeat(4000)));
    expect(claims.nonce).toBe(nonce);
    expect(claims.htu).toBe(new URL(url).origin + new URL(url).pathname);
    expect(claims.ath).toBe(accessTokenHash("t".repeat(4000)));
    // And back to a short one: the grown buffers are reused, nothing of the long one remains.
    const short = await claimsOf(dpop.proofFor("GET", "https://s.example/", "t"));
    expect(short).toEqual({
      htm: "GET",
      htu: "https://s.example/",
      jti: expect.any(String),
      iat: expect.any(Number),
      ath: accessTokenHash("t"),
    });
  });

  it("refuses a method that is not a token, even after a good one for the same URL", () => {
    dpop.proofFor("GET", "https://a.example/x");
    expect(() => dpop.proofFor('GE"T', "https://a.example/x")).toThrow(/method/);
    expect(() => dpop.proofFor("GET", "ftp://a.example/x")).toThrow(/http/);
  });
});
