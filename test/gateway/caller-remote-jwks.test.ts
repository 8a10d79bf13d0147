import { createServer, type Server } from "node:https";
import type { JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  adminPages,
  emulatorUpstream,
  errorCode,
  es256SigningKey,
  expectNoSecrets,
  type HttpAnswer,
  httpGet,
  KUBERNETES_ISSUER,
  serviceAccountJwt,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { createTestPki } from "../helpers/tls.js";

/**
 * Issue 23: service-account tokens verified against the cluster's keys fetched from `jwksUri`
 * over real TLS, trusted through `caFile` (a CA of its own, unknown to the upstreams). A good
 * token passes; an expired one, one for another audience, and one signed by a key the server
 * does not publish yet are refused with 407 — the unknown `kid` costing at most one refetch, so
 * a flood of made-up `kid`s is no flood of fetches (jose's cooldown, 30 s, is too long to wait
 * out here).
 */

type PrivateKey = Awaited<ReturnType<typeof es256SigningKey>>["privateKey"];

describe("service-account tokens with a remote JWKS over TLS", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let jwksServer: Server;
  let k1: PrivateKey;
  let k2: PrivateKey;
  let jwk1: JWK;
  let jwk2: JWK;
  /** What the JWKS server publishes now. */
  let served: JWK[] = [];
  let jwksFetches = 0;
  const tokens: string[] = [];
  const answers: HttpAnswer[] = [];

  const token = async (
    key: PrivateKey,
    kid: string,
    options: { audience?: string; expiresAt?: string | number } = {},
  ) => {
    const jwt = await serviceAccountJwt(key, {
      subject: "system:serviceaccount:payments:billing-client",
      kid,
      ...options,
    });
    tokens.push(jwt);
    return jwt;
  };

  const get = async (jwt: string, localAddress = "127.0.0.1") => {
    const answer = await httpGet(`${gateway.url}/billing/echo`, {
      localAddress,
      headers: { "proxy-authorization": `Bearer ${jwt}` },
    });
    answers.push(answer);
    return answer;
  };

  beforeAll(async () => {
    const [upstreamPki, clusterPki] = await Promise.all([createTestPki(), createTestPki()]);
    emulator = await startTlsEmulator(upstreamPki);
    const [pair1, pair2] = await Promise.all([es256SigningKey("k1"), es256SigningKey("k2")]);
    ({ privateKey: k1, jwk: jwk1 } = pair1);
    ({ privateKey: k2, jwk: jwk2 } = pair2);
    served = [jwk1];
    jwksServer = createServer(
      { cert: clusterPki.good.certPem, key: clusterPki.good.keyPem },
      (req, res) => {
        if (req.url !== "/openid/v1/jwks") {
          res.writeHead(404).end();
          return;
        }
        jwksFetches++;
        const body = JSON.stringify({ keys: served });
        res.writeHead(200, { "content-type": "application/json" }).end(body);
      },
    );
    await new Promise<void>((resolve) => jwksServer.listen(0, "127.0.0.1", resolve));
    const port = (jwksServer.address() as { port: number }).port;
    gateway = await startAppUnderTest({
      caPem: upstreamPki.caPem,
      files: { "cluster-ca.pem": clusterPki.caPem },
      config: {
        callers: {
          kubernetes: {
            issuer: KUBERNETES_ISSUER,
            jwksUri: `https://127.0.0.1:${port}/openid/v1/jwks`,
            caFile: "cluster-ca.pem",
          },
        },
        upstreams: [
          emulatorUpstream(emulator.url, "billing", {
            allow: [{ serviceAccount: "payments/billing-client" }],
          }),
        ],
      },
    });
  });
  afterAll(async () => {
    await gateway?.close();
    await emulator?.close();
    jwksServer?.closeAllConnections();
    await new Promise((resolve) => jwksServer?.close(resolve));
  });

  it("a good token passes: the keys are fetched once over TLS trusted through caFile", async () => {
    const jwt = await token(k1, "k1");
    const res = await get(jwt);
    expect(res.status, res.text).toBe(200);
    expect(jwksFetches).toBe(1);
    expect((await get(jwt)).status).toBe(200);
    expect(jwksFetches).toBe(1);
  });

  it("an expired token: 407, saying so", async () => {
    const res = await get(await token(k1, "k1", { expiresAt: Math.floor(Date.now() / 1000) - 60 }));
    expect(res.status).toBe(407);
    expect(errorCode(res.text)).toBe("caller_unauthenticated");
    expect(res.text).toContain("expired");
  });

  it("a token for another audience: 407, saying so", async () => {
    const res = await get(await token(k1, "k1", { audience: "some-other-service" }));
    expect(res.status).toBe(407);
    expect(res.text).toContain("audience is not one of [bearer-proxy]");
  });

  it("a key the server does not publish yet: 407, at most one refetch", async () => {
    const fetchesBefore = jwksFetches;
    const res = await get(await token(k2, "k2"));
    expect(res.status).toBe(407);
    expect(res.text).toContain("signed by a key the cluster does not publish");
    expect(jwksFetches - fetchesBefore).toBeLessThanOrEqual(1);
  });

  it("made-up kids (and k2, now published) within the cooldown cause no further fetch", async () => {
    served = [jwk1, jwk2];
    const fetchesBefore = jwksFetches;
    for (let i = 0; i < 5; i++) {
      expect((await get(await token(k2, `made-up-${i}`), "127.0.0.9")).status).toBe(407);
    }
    // Within jose's 30 s cooldown even the real new key waits for the next allowed refetch.
    expect((await get(await token(k2, "k2"))).status).toBe(407);
    expect(jwksFetches).toBe(fetchesBefore);
    expect((await get(await token(k1, "k1"))).status).toBe(200);
  });

  it("no service-account JWT in logs, error bodies, /status or /metrics", async () => {
    expect(tokens.length).toBeGreaterThan(8);
    expectNoSecrets(
      {
        logs: gateway.lines,
        bodies: answers.map((a) => a.text),
        ...(await adminPages(gateway.adminUrl)),
      },
      tokens,
    );
  });
});
