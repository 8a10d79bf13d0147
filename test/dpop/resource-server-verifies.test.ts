/**
 * Issue #24: proofs from src/token/dpop pass a resource server that checks them as RFC 9449
 * §4.3 and §7 ask (test/helpers/dpop-resource-server.ts), and that server refuses what it must:
 * a replayed jti, an ath of another token, a proof for another URL, a token bound elsewhere.
 */
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accessTokenHash, createDpop, type Dpop } from "../../src/token/dpop/index.js";
import {
  type DpopResourceServer,
  startDpopResourceServer,
} from "../helpers/dpop-resource-server.js";

const TOKEN = "bound-token.abc";
let dpop: Dpop;
let rs: DpopResourceServer;
let agent: Agent;
let boundJkt: string | undefined;

beforeAll(async () => {
  dpop = await createDpop({});
  boundJkt = dpop.jkt;
  rs = await startDpopResourceServer({
    expectedJkt: (token) => (token === TOKEN ? boundJkt : undefined),
  });
  agent = new Agent({ connect: { ca: rs.caPem } });
});
afterAll(async () => {
  await agent.close();
  await rs.close();
  dpop.close();
});

async function send(
  path: string,
  headers: Record<string, string>,
  method = "GET",
): Promise<{ status: number; wwwAuthenticate: unknown }> {
  const response = await request(`${rs.origin}${path}`, { method, headers, dispatcher: agent });
  await response.body.dump();
  return { status: response.statusCode, wwwAuthenticate: response.headers["www-authenticate"] };
}

const signed = (method: string, path: string, token = TOKEN) => ({
  authorization: dpop.authorization(token),
  dpop: dpop.proofFor(method, `${rs.origin}${path}`, token),
});

describe("the DPoP resource server", () => {
  it("accepts a fresh proof for each request, query strings and all", async () => {
    for (const [method, path] of [
      ["GET", "/v1/items?limit=5#frag"],
      ["POST", "/v1/items"],
      ["DELETE", "/v1/items/7"],
    ] as const) {
      expect((await send(path.split("#")[0]!, signed(method, path), method)).status).toBe(200);
    }
    const last = rs.seen.at(-1)!;
    expect(last).toMatchObject({ scheme: "DPoP", error: undefined, jkt: dpop.jkt });
    expect(last.claims).toMatchObject({
      htm: "DELETE",
      htu: `${rs.origin}/v1/items/7`,
      ath: accessTokenHash(TOKEN),
    });
  });

  it("refuses a replayed proof", async () => {
    const headers = signed("GET", "/once");
    expect((await send("/once", headers)).status).toBe(200);
    const replay = await send("/once", headers);
    expect(replay.status).toBe(401);
    expect(replay.wwwAuthenticate).toMatch(/^DPoP error="invalid_dpop_proof"/);
    expect(rs.seen.at(-1)?.description).toBe("jti replayed");
  });

  it("refuses a proof whose ath is another token's", async () => {
    const headers = { ...signed("GET", "/x", "some-other-token"), authorization: `DPoP ${TOKEN}` };
    expect((await send("/x", headers)).status).toBe(401);
    expect(rs.seen.at(-1)?.description).toBe("ath mismatch");
  });

  it("refuses a proof for another method or URL", async () => {
    expect((await send("/a", signed("GET", "/b"))).status).toBe(401);
    expect(rs.seen.at(-1)?.description).toMatch(/^htu mismatch/);
    expect((await send("/a", signed("POST", "/a"))).status).toBe(401);
    expect(rs.seen.at(-1)?.description).toBe("htm mismatch");
  });

  it("refuses the token as Bearer, and a token bound to another key", async () => {
    const headers = signed("GET", "/y");
    expect((await send("/y", { ...headers, authorization: `Bearer ${TOKEN}` })).status).toBe(401);
    expect(rs.seen.at(-1)?.error).toBe("invalid_token");
    const other = await createDpop({});
    try {
      const foreign = {
        authorization: other.authorization(TOKEN),
        dpop: other.proofFor("GET", `${rs.origin}/y`, TOKEN),
      };
      expect((await send("/y", foreign)).status).toBe(401);
      expect(rs.seen.at(-1)?.description).toMatch(/cnf\.jkt/);
    } finally {
      other.close();
    }
  });

  it("refuses a proof whose iat is outside the window", async () => {
    const stale = await createDpop(
      {},
      {
        clock: {
          now: () => performance.now(),
          wallNow: () => Date.now() - 120_000,
          setTimeout: (fn, ms) => setTimeout(fn, ms),
          clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
        },
      },
    );
    boundJkt = stale.jkt;
    try {
      const headers = {
        authorization: stale.authorization(TOKEN),
        dpop: stale.proofFor("GET", `${rs.origin}/z`, TOKEN),
      };
      expect((await send("/z", headers)).status).toBe(401);
      expect(rs.seen.at(-1)?.description).toMatch(/iat/);
    } finally {
      boundJkt = dpop.jkt;
      stale.close();
    }
  });
});
