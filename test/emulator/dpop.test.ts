/**
 * Issue 24, the emulator as a DPoP provider (for the bench's `dpop` variant and demos): a token
 * request with one `DPoP` proof gets `token_type: DPoP`, and the API routes take
 * `Authorization: DPoP <token>` with a `DPoP` header. Shape only: the emulator verifies no proof
 * (the real checks run against node-oidc-provider and test/helpers/dpop-resource-server.ts).
 * Through the proxy with `dpop: {}`, the whole path works against the emulator alone.
 */
import { request } from "undici";
import { describe, expect, it } from "vitest";
import type { EchoResponse } from "../../src/emulator/test-routes.js";
import { createDpop } from "../../src/token/dpop/index.js";
import { startAppUnderTest } from "../helpers/app-under-test.js";
import { fetchEmulatorToken, useEmulator, useEmulatorAgent } from "../helpers/emulator.js";

const FORM = "application/x-www-form-urlencoded;charset=UTF-8";
const FIELDS = "grant_type=client_credentials&client_id=demo-client&client_secret=demo-secret";

describe("the emulator speaks DPoP (unverified)", () => {
  const emulator = useEmulator();
  const agent = useEmulatorAgent(emulator);

  const tokenRequest = async (dpop: string | string[] | undefined) => {
    const response = await request(`${emulator().url}/iam/v1/oauth2/token`, {
      method: "POST",
      dispatcher: agent(),
      headers: { "content-type": FORM, ...(dpop === undefined ? {} : { dpop }) },
      body: FIELDS,
    });
    return {
      status: response.statusCode,
      json: (await response.body.json()) as Record<string, unknown>,
    };
  };
  const get = async (headers: Record<string, string | string[]>) => {
    const response = await request(`${emulator().url}/platform/v1/spreadsheets/1`, {
      dispatcher: agent(),
      headers,
    });
    return {
      status: response.statusCode,
      json: (await response.body.json()) as Record<string, unknown>,
    };
  };

  it("answers token_type DPoP to a request with one proof, Bearer without", async () => {
    const dpop = await createDpop({});
    try {
      const proof = dpop.proofFor("POST", `${emulator().url}/iam/v1/oauth2/token`);
      const bound = await tokenRequest(proof);
      expect(bound.status).toBe(200);
      expect(bound.json.token_type).toBe("DPoP");
      expect((await tokenRequest(undefined)).json.token_type).toBe("Bearer");
    } finally {
      dpop.close();
    }
  });

  it("refuses two proofs, or one that is not a compact JWS", async () => {
    for (const dpop of [["eyA.b.c", "eyA.b.c"], "not-a-jws", "eyA.b"]) {
      expect(await tokenRequest(dpop)).toEqual({
        status: 400,
        json: {
          error: "invalid_dpop_proof",
          error_description: "expected one DPoP header holding a compact JWS",
        },
      });
    }
  });

  it("API routes take Authorization: DPoP with exactly one DPoP header", async () => {
    const token = await fetchEmulatorToken(emulator(), agent());
    expect((await get({ authorization: `DPoP ${token}`, dpop: "eyA.b.c" })).status).toBe(200);
    for (const dpop of [undefined, ["eyA.b.c", "eyA.b.c"]]) {
      const answer = await get({
        authorization: `DPoP ${token}`,
        ...(dpop === undefined ? {} : { dpop }),
      });
      expect(answer).toEqual({
        status: 401,
        json: {
          error: "invalid_token",
          error_description: "Authorization: DPoP needs exactly one DPoP proof header",
        },
      });
    }
    // The scheme word stays case-sensitive, as for Bearer.
    expect((await get({ authorization: `dpop ${token}`, dpop: "eyA.b.c" })).status).toBe(401);
  });
});

describe("the proxy with dpop: {} against the emulator alone", () => {
  const emulator = useEmulator();

  it("fetches a DPoP token and calls the API with Authorization: DPoP and a proof", async () => {
    const gateway = await startAppUnderTest({
      caPem: emulator().caPem,
      config: {
        upstreams: [
          {
            name: "sheets",
            baseUrl: emulator().url,
            clientId: "demo-client",
            clientSecret: "demo-secret",
            dpop: {},
          },
        ],
      },
    });
    try {
      const response = await request(`${gateway.url}/echo/orders`);
      expect(response.statusCode).toBe(200);
      const echoed = (await response.body.json()) as EchoResponse;
      const named = (name: string) =>
        echoed.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
      expect(named("authorization")).toEqual([expect.stringMatching(/^DPoP /)]);
      expect(named("dpop")).toEqual([expect.stringMatching(/^ey/)]);
    } finally {
      await gateway.close();
    }
  });
});
