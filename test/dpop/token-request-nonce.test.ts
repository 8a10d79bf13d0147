/**
 * Issue #24 against a real authorization server (node-oidc-provider 9, test/helpers/
 * dpop-authorization-server.ts): a client-credentials request with a DPoP proof meets
 * `use_dpop_nonce` (RFC 9449 §8), is retried once with the nonce, and gets a DPoP token whose
 * `cnf.jkt` is our key's thumbprint; that token and our proofs then pass a resource server that
 * verifies the token against the AS's JWKS. The token request is made here with undici, as
 * client-credentials.ts will make it once DPoP is wired in.
 */
import { decodeJwt } from "jose";
import { request } from "undici";
import { afterAll, describe, expect, it } from "vitest";
import { createDpop, type Dpop, type DpopSpec } from "../../src/token/dpop/index.js";
import { startDpopAuthorizationServer } from "../helpers/dpop-authorization-server.js";
import { useDpopBench } from "./support.js";

const bench = useDpopBench({ rs: {}, keys: true });
const open: Dpop[] = [];

afterAll(() => {
  for (const d of open) d.close();
});

async function dpopFor(spec: DpopSpec): Promise<Dpop> {
  const d = await createDpop(spec, { pollIntervalMs: 0 });
  open.push(d);
  return d;
}

interface TokenAttempt {
  status: number;
  body: Record<string, unknown>;
}

/** One token request with a fresh proof; the answer is noted (nonce kept). */
async function tokenRequest(d: Dpop | undefined): Promise<TokenAttempt & { retry: boolean }> {
  const headers: Record<string, string> = {
    "content-type": "application/x-www-form-urlencoded",
    accept: "application/json",
  };
  if (d) headers.dpop = d.proofFor("POST", bench.as.tokenUrl);
  const response = await request(bench.as.tokenUrl, {
    method: "POST",
    headers,
    body: new URLSearchParams({
      grant_type: "client_credentials",
      client_id: bench.as.clientId,
      client_secret: bench.as.clientSecret,
      scope: bench.as.scope,
    }).toString(),
  });
  const text = await response.body.text();
  const retry = d
    ? d.noteResponse(bench.as.tokenUrl, response.statusCode, response.headers, text)
    : false;
  return { status: response.statusCode, body: JSON.parse(text), retry };
}

/** The walk client-credentials.ts will take: retry once on use_dpop_nonce. */
async function getToken(d: Dpop): Promise<TokenAttempt & { attempts: number }> {
  const first = await tokenRequest(d);
  if (!first.retry) return { ...first, attempts: 1 };
  return { ...(await tokenRequest(d)), attempts: 2 };
}

async function callResource(d: Dpop, token: string, path: string): Promise<number> {
  const url = `${bench.rs.origin}${path}`;
  const response = await request(url, {
    headers: { authorization: d.authorization(token), dpop: d.proofFor("GET", url, token) },
    dispatcher: bench.agent,
  });
  await response.body.dump();
  return response.statusCode;
}

describe("a DPoP token from a real authorization server", () => {
  it("meets use_dpop_nonce first, then gets a DPoP token bound to our key", async () => {
    const d = await dpopFor({});
    const first = await tokenRequest(d);
    expect(first.status).toBe(400);
    expect(first.body.error).toBe("use_dpop_nonce");
    expect(first.retry).toBe(true);
    const asOrigin = new URL(bench.as.tokenUrl).origin;
    expect(d.nonces.get(asOrigin)).toMatch(/^[\w-]+$/);

    const second = await tokenRequest(d);
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ token_type: "DPoP", scope: bench.as.scope });
    const claims = decodeJwt(second.body.access_token as string);
    expect(claims.cnf).toEqual({ jkt: d.jkt });
    expect(claims.aud).toBe(bench.as.resource);

    expect(await callResource(d, second.body.access_token as string, "/v1/orders?x=1")).toBe(200);
    expect(bench.rs.seen.at(-1)).toMatchObject({ status: 200, jkt: d.jkt, error: undefined });
  });

  it("needs no second round trip while the AS's nonce is current", async () => {
    const d = await dpopFor({});
    expect((await getToken(d)).attempts).toBe(2);
    const again = await getToken(d);
    expect(again).toMatchObject({ status: 200, attempts: 1 });
    expect(again.body.token_type).toBe("DPoP");
  });

  for (const [kind, algorithm] of [
    ["ec-p256", "ES256"],
    ["ed25519", "EdDSA"],
    ["rsa-2048", "PS256"],
    ["rsa-2048", "RS256"],
  ] as const) {
    it(`works with a ${algorithm} key from dpop.keyFile`, async () => {
      const keyFile = await bench.keys.write(`${algorithm}.pem`, kind);
      const d = await dpopFor({ keyFile, algorithm });
      const token = await getToken(d);
      expect(token.status).toBe(200);
      expect(decodeJwt(token.body.access_token as string).cnf).toEqual({ jkt: d.jkt });
      expect(await callResource(d, token.body.access_token as string, `/${algorithm}`)).toBe(200);
    });
  }

  it("is useless with another key's proofs, and not issued without a proof", async () => {
    const d = await dpopFor({});
    const token = (await getToken(d)).body.access_token as string;
    const thief = await dpopFor({});
    expect(await callResource(thief, token, "/stolen")).toBe(401);
    expect(bench.rs.seen.at(-1)).toMatchObject({ error: "invalid_token" });
    expect(bench.rs.seen.at(-1)?.description).toMatch(/cnf\.jkt/);

    const withoutProof = await tokenRequest(undefined);
    expect(withoutProof.status).toBe(400);
    // dpop_bound_access_tokens: oidc-provider refuses the grant (its description is generic).
    expect(withoutProof.body.error).toBe("invalid_grant");
  });

  it("rejects a replayed token-request proof", async () => {
    const d = await dpopFor({});
    await getToken(d); // the nonce is known now
    const proof = d.proofFor("POST", bench.as.tokenUrl);
    const send = () =>
      request(bench.as.tokenUrl, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", dpop: proof },
        body: new URLSearchParams({
          grant_type: "client_credentials",
          client_id: bench.as.clientId,
          client_secret: bench.as.clientSecret,
        }).toString(),
      }).then(async (r) => ({ status: r.statusCode, body: await r.body.json() }));
    expect((await send()).status).toBe(200);
    expect(await send()).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
  });
});

describe("an authorization server that demands no nonce", () => {
  it("issues the DPoP token on the first request (client_secret_basic)", async () => {
    const plain = await startDpopAuthorizationServer({
      requireNonce: false,
      authMethod: "client_secret_basic",
    });
    const d = await dpopFor({ algorithm: "EdDSA" });
    try {
      const basic = Buffer.from(`${plain.clientId}:${plain.clientSecret}`).toString("base64");
      const response = await request(plain.tokenUrl, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${basic}`,
          dpop: d.proofFor("POST", plain.tokenUrl),
        },
        body: "grant_type=client_credentials",
      });
      const text = await response.body.text();
      expect(d.noteResponse(plain.tokenUrl, response.statusCode, response.headers, text)).toBe(
        false,
      );
      expect(response.statusCode).toBe(200);
      const body = JSON.parse(text);
      expect(body.token_type).toBe("DPoP");
      expect(decodeJwt(body.access_token).cnf).toEqual({ jkt: d.jkt });
      expect(plain.requests).toEqual([{ method: "POST", path: "/token", dpop: true, status: 200 }]);
    } finally {
      await plain.close();
    }
  });
});
