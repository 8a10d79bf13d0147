import { createServer, type Server } from "node:https";
import { join } from "node:path";
import type { JWK } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import type { Emulator } from "../../src/emulator/types.js";
import { type AppUnderTest, logsMatching, startAppUnderTest } from "../helpers/app-under-test.js";
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
 * The anonymous-JWKS defect of issue 23: on a real cluster `/openid/v1/jwks` answers only
 * authenticated service accounts, so a gateway whose fetch sends no token refuses every
 * service-account caller. Here the cluster's key server (real TLS, a CA of its own) answers 401
 * without `Authorization: Bearer <the gateway's own token>`. Without `jwksTokenFile` the caller
 * gets 503 `caller_keys_unavailable` (its token was never checked: no 407, no failure counted);
 * a reload that adds `jwksTokenFile` admits it (the new key builds a new key source); the
 * gateway's token shows nowhere: logs, answers, /status, /metrics.
 */

/** The gateway pod's own service-account token, as mounted for it. */
const GATEWAY_TOKEN = `eyJhbGciOiJSUzI1NiIsImtpZCI6ImFwaSJ9.${"Z2F0ZXdheQ".repeat(6)}.${"c2lnbmF0dXJl".repeat(5)}`;
const TOKEN_FILE = "gateway-token";

describe("service-account callers with a JWKS that needs a bearer token", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let jwksServer: Server;
  let jwksUri: string;
  let key: Awaited<ReturnType<typeof es256SigningKey>>["privateKey"];
  let jwk: JWK;
  /** The `Authorization` of each JWKS request. */
  const received: (string | undefined)[] = [];
  const answers: HttpAnswer[] = [];
  const callerTokens: string[] = [];

  const kubernetes = (extra: Record<string, unknown> = {}) => ({
    issuer: KUBERNETES_ISSUER,
    jwksUri,
    caFile: "cluster-ca.pem",
    ...extra,
  });
  const document = (k8s: Record<string, unknown>) => ({
    callers: { kubernetes: k8s },
    upstreams: [
      emulatorUpstream(emulator.url, "billing", {
        allow: [{ serviceAccount: "payments/billing-client" }],
      }),
    ],
  });

  const call = async () => {
    const jwt = await serviceAccountJwt(key, {
      subject: "system:serviceaccount:payments:billing-client",
    });
    callerTokens.push(jwt);
    const answer = await httpGet(`${gateway.url}/billing/echo`, {
      headers: { "proxy-authorization": `Bearer ${jwt}` },
    });
    answers.push(answer);
    return answer;
  };

  beforeAll(async () => {
    const [upstreamPki, clusterPki] = await Promise.all([createTestPki(), createTestPki()]);
    emulator = await startTlsEmulator(upstreamPki);
    ({ privateKey: key, jwk } = await es256SigningKey("k1"));
    jwksServer = createServer(
      { cert: clusterPki.good.certPem, key: clusterPki.good.keyPem },
      (req, res) => {
        received.push(req.headers.authorization);
        if (req.url !== "/openid/v1/jwks") res.writeHead(404).end();
        else if (req.headers.authorization !== `Bearer ${GATEWAY_TOKEN}`) {
          // What the API server answers a client it cannot authenticate.
          res.writeHead(401, { "content-type": "application/json" }).end(
            JSON.stringify({
              kind: "Status",
              status: "Failure",
              reason: "Unauthorized",
              code: 401,
            }),
          );
        } else {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ keys: [jwk] }));
        }
      },
    );
    await new Promise<void>((resolve) => jwksServer.listen(0, "127.0.0.1", resolve));
    jwksUri = `https://127.0.0.1:${(jwksServer.address() as { port: number }).port}/openid/v1/jwks`;
    gateway = await startAppUnderTest({
      caPem: upstreamPki.caPem,
      files: { "cluster-ca.pem": clusterPki.caPem, [TOKEN_FILE]: GATEWAY_TOKEN },
      config: document(kubernetes()),
    });
  });
  afterAll(async () => {
    await gateway?.close();
    await emulator?.close();
    jwksServer?.closeAllConnections();
    await new Promise((resolve) => jwksServer?.close(resolve));
  });

  it("an anonymous JWKS fetch is refused (401), so the caller gets 503 and the log says why", async () => {
    const res = await call();
    expect(res.status).toBe(503);
    expect(errorCode(res.text)).toBe("caller_keys_unavailable");
    expect(res.headers["retry-after"]).toBe("5");
    expect(res.text).toContain("signing keys could not be loaded");
    expect(received).toEqual([undefined]);
    expect(logsMatching(gateway.records, "signing keys could not be loaded")).toEqual([
      expect.objectContaining({
        err: expect.objectContaining({
          message: expect.stringContaining("set callers.kubernetes.jwksTokenFile"),
        }),
      }),
    ]);
  });

  it("a reload adding jwksTokenFile admits the caller: the fetch presents the token", async () => {
    const next = await loadConfig({
      configText: JSON.stringify({
        listen: { host: "127.0.0.1", port: 0 },
        admin: { host: "127.0.0.1", port: 0 },
        ...document(kubernetes({ jwksTokenFile: TOKEN_FILE })),
        upstreams: document({}).upstreams.map((u) => ({ ...u, tls: { caFile: "test-ca.pem" } })),
      }),
      env: {},
      cwd: gateway.dir,
    });
    expect(next.callers.kubernetes?.jwksTokenFile).toBe(join(gateway.dir, TOKEN_FILE));
    expect(await gateway.app.reload(next)).toEqual({ outcome: "applied" });
    const res = await call();
    expect(res.status, res.text).toBe(200);
    expect(received).toEqual([undefined, `Bearer ${GATEWAY_TOKEN}`]);
    // The keys are cached: a second caller costs no fetch.
    expect((await call()).status).toBe(200);
    expect(received).toHaveLength(2);
  });

  it("the gateway's token is in no log line, answer, /status or /metrics", async () => {
    expect(answers).toHaveLength(3);
    expectNoSecrets(
      {
        logs: gateway.lines,
        bodies: answers.map((a) => a.text),
        ...(await adminPages(gateway.adminUrl)),
      },
      [GATEWAY_TOKEN, ...callerTokens],
    );
  });
});
