/**
 * Issue #24: recognising `use_dpop_nonce` from an authorization server (400 + JSON error,
 * RFC 9449 §8) and a resource server (401 + WWW-Authenticate, §9), reading challenges the way
 * real servers write them, and keeping nonces per origin in a bounded store.
 */
import { describe, expect, it } from "vitest";
import {
  createNonceStore,
  dpopNonceOf,
  findChallenge,
  isUseDpopNonceError,
  parseChallenges,
} from "../../src/token/dpop/index.js";

describe("WWW-Authenticate", () => {
  it("reads several challenges in one field, any case, quoted or not", () => {
    expect(
      parseChallenges(
        'Bearer realm="api", error="invalid_token", dpop ALGS="ES256 PS256", Error=use_dpop_nonce, error_description="a \\"quoted\\", comma"',
      ),
    ).toEqual([
      { scheme: "bearer", params: { realm: "api", error: "invalid_token" }, token68: undefined },
      {
        scheme: "dpop",
        params: {
          algs: "ES256 PS256",
          error: "use_dpop_nonce",
          error_description: 'a "quoted", comma',
        },
        token68: undefined,
      },
    ]);
  });

  it("reads challenges spread over fields, token68 and bare schemes", () => {
    const challenges = parseChallenges([
      "Basic dXNlcjpwYXNz==, Negotiate",
      'DPoP  error = "use_dpop_nonce"',
    ]);
    expect(challenges.map((c) => [c.scheme, c.token68, { ...c.params }])).toEqual([
      ["basic", "dXNlcjpwYXNz==", {}],
      ["negotiate", undefined, {}],
      ["dpop", undefined, { error: "use_dpop_nonce" }],
    ]);
    expect(findChallenge(["Bearer", 'DPoP error="x"'], "DPOP")?.params.error).toBe("x");
  });

  it("survives garbage without throwing", () => {
    for (const value of ['"', "=,=", 'DPoP error="unterminated', ",,,", "  ", "DPoP =x, @@@"]) {
      expect(() => parseChallenges(value)).not.toThrow();
    }
    expect(findChallenge('DPoP error="unterminated', "dpop")?.params.error).toBe("unterminated");
  });
});

describe("isUseDpopNonceError", () => {
  const nonce = { "dpop-nonce": "eyJ7S_zG.eyJH0-Z.HX4w-7v" };

  it("takes an authorization server's 400 use_dpop_nonce with a DPoP-Nonce", () => {
    const body = '{"error":"use_dpop_nonce","error_description":"nonce required"}';
    expect(isUseDpopNonceError(400, nonce, body)).toBe(true);
    expect(isUseDpopNonceError(400, nonce, JSON.parse(body))).toBe(true);
    expect(isUseDpopNonceError(400, {}, body)).toBe(false); // nothing to retry with
    expect(isUseDpopNonceError(400, nonce, '{"error":"invalid_dpop_proof"}')).toBe(false);
    expect(isUseDpopNonceError(400, nonce, "<html>")).toBe(false);
    expect(isUseDpopNonceError(500, nonce, body)).toBe(false);
  });

  it("takes a resource server's 401 DPoP error=use_dpop_nonce, in raw or object headers", () => {
    const raw = [
      Buffer.from("WWW-Authenticate"),
      Buffer.from('Bearer realm="x", DPoP error="use_dpop_nonce", algs="ES256"'),
      Buffer.from("DPoP-Nonce"),
      Buffer.from("n0nce"),
    ];
    expect(isUseDpopNonceError(401, raw)).toBe(true);
    expect(
      isUseDpopNonceError(401, {
        "www-authenticate": 'dpop error="use_dpop_nonce"',
        "dpop-nonce": "n0nce",
      }),
    ).toBe(true);
    expect(
      isUseDpopNonceError(401, {
        "www-authenticate": 'Bearer error="use_dpop_nonce"',
        "dpop-nonce": "n0nce",
      }),
    ).toBe(false);
    expect(
      isUseDpopNonceError(401, {
        "www-authenticate": 'DPoP error="invalid_token"',
        "dpop-nonce": "n0nce",
      }),
    ).toBe(false);
  });

  it("refuses nonces outside RFC 9449's NQCHAR, and repeated ones", () => {
    expect(dpopNonceOf({ "dpop-nonce": 'a"b' })).toBeUndefined();
    expect(dpopNonceOf({ "dpop-nonce": "a b" })).toBeUndefined();
    expect(dpopNonceOf({ "dpop-nonce": "x".repeat(2000) })).toBeUndefined();
    expect(dpopNonceOf({ "dpop-nonce": ["a", "b"] })).toBeUndefined();
    expect(dpopNonceOf(["dpop-nonce", "a", "DPoP-Nonce", "b"])).toBeUndefined();
    expect(dpopNonceOf(["DPOP-NONCE", "ok!~"])).toBe("ok!~");
  });
});

describe("the nonce store", () => {
  it("keeps the latest nonce per origin, from every response that carries one", () => {
    const store = createNonceStore();
    store.update("https://a.example", { "dpop-nonce": "1" });
    store.update("https://b.example", ["DPoP-Nonce", "x"]);
    store.update("https://a.example", { "content-type": "text/plain" });
    expect(store.get("https://a.example")).toBe("1");
    store.update("https://a.example", { "dpop-nonce": "2" });
    expect(store.get("https://a.example")).toBe("2");
    expect(store.get("https://b.example")).toBe("x");
  });

  it("is bounded: the least recently used origin goes first", () => {
    const store = createNonceStore({ max: 2 });
    store.set("https://a", "1");
    store.set("https://b", "2");
    store.get("https://a");
    store.set("https://c", "3");
    expect(store.size).toBe(2);
    expect(store.get("https://b")).toBeUndefined();
    expect(store.get("https://a")).toBe("1");
  });
});
