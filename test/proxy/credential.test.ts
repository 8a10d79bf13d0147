/**
 * The one writer of the upstream credential (src/proxy/credential.ts): `Authorization: Bearer
 * <token>`, or `DPoP <token>` for a DPoP-bound token (RFC 9449 §7.1), written into its slot of
 * the forwarded header list; the value built once per token, not per request; for DPoP a fresh
 * proof per inject (new `jti`, `htm`, `htu` without the query, `ath` of the token it goes
 * with). A token that can't go in a header, a DPoP slot without a DPoP key, or a proof that
 * can't be signed throw a CredentialError whose message names no secret.
 */
import { createHash } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import {
  authorizationValue,
  CredentialError,
  type CredentialSlots,
  CredentialWriter,
} from "../../src/proxy/credential.js";
import { createDpop, type Dpop } from "../../src/token/dpop/index.js";
import type { AccessToken } from "../../src/token/token-provider.js";
import { testToken } from "./support/pipeline-fakes.js";

const BEARER_SLOTS: CredentialSlots = { authorizationIndex: 3, dpopIndex: -1 };
const DPOP_SLOTS: CredentialSlots = { authorizationIndex: 3, dpopIndex: 5 };

/** A forwarded list with the credential slots empty, as routing/forwarded-headers.ts builds it. */
function headerList(dpop = false): string[] {
  return [
    "accept",
    "*/*",
    "authorization",
    "",
    ...(dpop ? ["dpop", ""] : []),
    "x-version",
    "2026-09-01",
  ];
}

function claimsOf(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString()) as Record<
    string,
    unknown
  >;
}

/** A token whose `value` reads are counted. */
function countingToken(value: string): { token: AccessToken; reads: () => number } {
  let reads = 0;
  const token = {
    ...testToken(value),
    get value() {
      reads++;
      return value;
    },
  };
  return { token, reads: () => reads };
}

let dpop: Dpop;
beforeAll(async () => {
  dpop = await createDpop({ keyFile: undefined, algorithm: undefined });
});

describe("authorizationValue", () => {
  it("is `Bearer <token>` for a bearer token and `DPoP <token>` for a DPoP-bound one", () => {
    expect(authorizationValue(testToken("abc.DEF-123"))).toBe("Bearer abc.DEF-123");
    expect(authorizationValue(testToken("abc", { tokenType: "DPoP", dpop }))).toBe("DPoP abc");
  });

  it("refuses a token that could break or split the header", () => {
    for (const bad of ["a b", "a\r\nx-injected: 1", "tök", ""]) {
      expect(() => authorizationValue(testToken(bad))).toThrow();
    }
  });
});

describe("CredentialWriter", () => {
  it("writes Bearer into the Authorization slot and touches nothing else", () => {
    const writer = new CredentialWriter({ name: "api" });
    const headers = headerList();
    writer.inject(headers, BEARER_SLOTS, testToken("tok-1"), "GET", "");
    expect(headers).toEqual([
      "accept",
      "*/*",
      "authorization",
      "Bearer tok-1",
      "x-version",
      "2026-09-01",
    ]);
  });

  it("builds the value once per token, and anew for the next token", () => {
    const writer = new CredentialWriter({ name: "api" });
    const first = countingToken("tok-1");
    writer.inject(headerList(), BEARER_SLOTS, first.token, "GET", "");
    const readsForOne = first.reads();
    expect(readsForOne).toBeGreaterThan(0);

    const again = headerList();
    writer.inject(again, BEARER_SLOTS, first.token, "GET", "");
    writer.inject(headerList(), BEARER_SLOTS, first.token, "POST", "");
    expect(first.reads()).toBe(readsForOne);
    expect(again[3]).toBe("Bearer tok-1");

    // A refreshed token (a new object, as the token engine makes) is written as itself.
    const second = headerList();
    writer.inject(second, BEARER_SLOTS, testToken("tok-2"), "GET", "");
    expect(second[3]).toBe("Bearer tok-2");
  });

  it("writes DPoP and a fresh proof per inject, naming method, URL without query and the token", () => {
    const writer = new CredentialWriter({ name: "rs" });
    const token = testToken("dpop-tok", { tokenType: "DPoP", dpop });
    const url = "https://rs.example.test/base/items?page=2";
    const one = headerList(true);
    const two = headerList(true);
    writer.inject(one, DPOP_SLOTS, token, "POST", url);
    writer.inject(two, DPOP_SLOTS, token, "POST", url);

    expect(one[3]).toBe("DPoP dpop-tok");
    expect(one[4]).toBe("dpop");
    const first = claimsOf(one[5]!);
    const second = claimsOf(two[5]!);
    expect(first).toMatchObject({
      htm: "POST",
      htu: "https://rs.example.test/base/items",
      ath: createHash("sha256").update("dpop-tok").digest("base64url"),
    });
    // A retry or a replay never resends a proof the upstream may have seen.
    expect(one[5]).not.toBe(two[5]);
    expect(first.jti).not.toBe(second.jti);
    expect(two.slice(6)).toEqual(["x-version", "2026-09-01"]);
  });

  it("throws a CredentialError, naming no secret, for a token with a space", () => {
    const writer = new CredentialWriter({ name: "api" });
    const headers = headerList();
    let thrown: unknown;
    try {
      writer.inject(headers, BEARER_SLOTS, testToken("secret value"), "GET", "");
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(CredentialError);
    const err = thrown as CredentialError;
    expect(err.name).toBe("CredentialError");
    expect(err.message).not.toContain("secret");
    expect(err.cause).toBeInstanceOf(Error);
    expect(String((err.cause as Error).message)).not.toContain("secret value");
    expect(headers[3]).toBe("");
  });

  it("keeps refusing a bad token (not cached), and writes the next good one", () => {
    const writer = new CredentialWriter({ name: "api" });
    const bad = testToken("bad token");
    expect(() => writer.inject(headerList(), BEARER_SLOTS, bad, "GET", "")).toThrow(
      CredentialError,
    );
    expect(() => writer.inject(headerList(), BEARER_SLOTS, bad, "GET", "")).toThrow(
      CredentialError,
    );
    const headers = headerList();
    writer.inject(headers, BEARER_SLOTS, testToken("good"), "GET", "");
    expect(headers[3]).toBe("Bearer good");
  });

  it("throws a CredentialError naming the upstream when a DPoP slot meets a token with no DPoP key", () => {
    const writer = new CredentialWriter({ name: "rs" });
    expect(() =>
      writer.inject(headerList(true), DPOP_SLOTS, testToken("plain"), "GET", "https://rs.test/"),
    ).toThrow(/upstream rs: its token is not bound to a DPoP key/);
  });

  it("throws a CredentialError, with the cause kept, when the proof can't be signed", () => {
    const writer = new CredentialWriter({ name: "rs" });
    const broken: Dpop = {
      ...dpop,
      proofFor: () => {
        throw new Error("key unusable");
      },
    };
    const token = testToken("t", { tokenType: "DPoP", dpop: broken });
    let thrown: unknown;
    try {
      writer.inject(headerList(true), DPOP_SLOTS, token, "GET", "https://rs.test/");
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(CredentialError);
    expect((thrown as Error).message).toBe("no DPoP proof could be signed for upstream rs");
    expect(((thrown as Error).cause as Error).message).toBe("key unusable");
  });
});
