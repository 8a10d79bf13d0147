/**
 * Issue #24, RFC 9449 §9: a resource server that demands nonces costs one extra round trip for
 * the first request only. `noteResponse` keeps the nonce from every response, says when a 401
 * asks for one retry, and a nonce the server announces in a 200 is used without any retry.
 */
import { Agent, request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { createDpop, type Dpop } from "../../src/token/dpop/index.js";
import {
  type DpopResourceServer,
  startDpopResourceServer,
} from "../helpers/dpop-resource-server.js";

const TOKEN = "tok";
let dpop: Dpop | undefined;
let rs: DpopResourceServer | undefined;
let agent: Agent | undefined;
afterEach(async () => {
  await agent?.close();
  await rs?.close();
  dpop?.close();
});

async function setUp(options: { rotateNonceOnSuccess?: boolean }) {
  dpop = await createDpop({});
  rs = await startDpopResourceServer({ requireNonce: true, ...options });
  agent = new Agent({ connect: { ca: rs.caPem } });
  return { dpop, rs, agent };
}

/** What the proxy's exchange will do: send, note the answer, retry once on use_dpop_nonce. */
async function fetchWithNonceRetry(
  d: Dpop,
  dispatcher: Agent,
  url: string,
): Promise<{ status: number; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    const response = await request(url, {
      headers: { authorization: d.authorization(TOKEN), dpop: d.proofFor("GET", url, TOKEN) },
      dispatcher,
    });
    await response.body.dump();
    const retry = d.noteResponse(url, response.statusCode, response.headers);
    if (!retry || attempt === 2) return { status: response.statusCode, attempts: attempt };
  }
}

describe("resource server nonces", () => {
  it("retries the first request once, then needs no extra round trip", async () => {
    const { dpop, rs, agent } = await setUp({});
    const first = await fetchWithNonceRetry(dpop, agent, `${rs.origin}/a`);
    expect(first).toEqual({ status: 200, attempts: 2 });
    expect(rs.seen[0]).toMatchObject({ status: 401, error: "use_dpop_nonce" });
    expect(dpop.nonces.get(rs.origin)).toBe(rs.nonce);

    for (let i = 0; i < 3; i++) {
      expect(await fetchWithNonceRetry(dpop, agent, `${rs.origin}/b?i=${i}`)).toEqual({
        status: 200,
        attempts: 1,
      });
    }
    expect(rs.seen.map((s) => s.status)).toEqual([401, 200, 200, 200, 200]);
    expect(rs.seen.at(-1)?.claims?.nonce).toBe(rs.nonce);
  });

  it("takes a rotated nonce from the 401 that announces it", async () => {
    const { dpop, rs, agent } = await setUp({});
    await fetchWithNonceRetry(dpop, agent, `${rs.origin}/warm`);
    const old = rs.nonce;
    const next = rs.rotateNonce();
    expect(await fetchWithNonceRetry(dpop, agent, `${rs.origin}/c`)).toEqual({
      status: 200,
      attempts: 2,
    });
    expect(rs.seen.slice(-2).map((s) => [s.status, s.claims?.nonce])).toEqual([
      [401, old],
      [200, next],
    ]);
  });

  it("follows a nonce rotated in every successful response without retries", async () => {
    const { dpop, rs, agent } = await setUp({ rotateNonceOnSuccess: true });
    await fetchWithNonceRetry(dpop, agent, `${rs.origin}/warm`);
    const nonces = new Set<string>();
    for (let i = 0; i < 5; i++) {
      expect((await fetchWithNonceRetry(dpop, agent, `${rs.origin}/d`)).attempts).toBe(1);
      nonces.add(rs.seen.at(-1)!.claims!.nonce!);
    }
    expect(nonces.size).toBe(5);
  });

  it("does not ask for a retry on other 401s, which leave the nonce as it was", async () => {
    const { dpop, rs, agent } = await setUp({});
    await fetchWithNonceRetry(dpop, agent, `${rs.origin}/warm`);
    const url = `${rs.origin}/e`;
    const response = await request(url, {
      headers: { authorization: `Bearer ${TOKEN}`, dpop: dpop.proofFor("GET", url, TOKEN) },
      dispatcher: agent,
    });
    await response.body.dump();
    expect(response.statusCode).toBe(401);
    expect(dpop.noteResponse(url, response.statusCode, response.headers)).toBe(false);
    expect(dpop.nonces.get(rs.origin)).toBe(rs.nonce);
  });
});
