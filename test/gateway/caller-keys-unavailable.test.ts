import { createServer, type Server } from "node:https";
import type { JWK } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { JWKS_RETRY_AFTER_FAILURE_MS } from "../../src/callers/jwks-source.js";
import type { Emulator } from "../../src/emulator/types.js";
import { type AppUnderTest, logsMatching, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  adminPages,
  adminText,
  callerDenialCounts,
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
 * When the cluster's signing keys cannot be loaded at all (here: a JWKS server that has only
 * ever answered 500, as an API server mid-upgrade does), a service-account caller is not at
 * fault. It gets 503 `caller_keys_unavailable` with `Retry-After`, not a 407 (which makes git
 * ask for other credentials), and the refusal counts toward no throttle: fifteen of them from
 * one address never become 429 `caller_throttled`, and once the keys are back (after the
 * fetch backoff) the same address is admitted at once.
 */

const CALLER = "127.0.0.4";

describe("service-account callers while the cluster's keys are unavailable", () => {
  let emulator: Emulator;
  let gateway: AppUnderTest;
  let jwksServer: Server;
  let key: Awaited<ReturnType<typeof es256SigningKey>>["privateKey"];
  let jwk: JWK;
  /** How the JWKS server answers now. */
  let serving = false;
  let jwksFetches = 0;
  const answers: HttpAnswer[] = [];
  const callerTokens: string[] = [];

  const call = async () => {
    const jwt = await serviceAccountJwt(key, {
      subject: "system:serviceaccount:payments:billing-client",
    });
    callerTokens.push(jwt);
    const answer = await httpGet(`${gateway.url}/billing/echo`, {
      localAddress: CALLER,
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
        jwksFetches++;
        if (req.url !== "/openid/v1/jwks") res.writeHead(404).end();
        else if (!serving) res.writeHead(500).end("etcdserver: request timed out");
        else
          res
            .writeHead(200, { "content-type": "application/json" })
            .end(`{"keys":[${JSON.stringify(jwk)}]}`);
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
  afterEach(() => {
    vi.useRealTimers();
  });
  afterAll(async () => {
    await gateway?.close();
    await emulator?.close();
    jwksServer?.closeAllConnections();
    await new Promise((resolve) => jwksServer?.close(resolve));
  });

  it("a JWKS server that never served keys: 503 caller_keys_unavailable with Retry-After, no challenge", async () => {
    const res = await call();
    expect(res.status, res.text).toBe(503);
    expect(res.headers["bearer-proxy-error"]).toBe("caller_keys_unavailable");
    expect(res.headers["retry-after"]).toBe(String(JWKS_RETRY_AFTER_FAILURE_MS / 1000));
    expect(res.headers["proxy-authenticate"]).toBeUndefined();
    expect(JSON.parse(res.text)).toEqual({
      error: {
        code: "caller_keys_unavailable",
        message: "the cluster's service-account signing keys could not be loaded; retry later",
        upstream: "billing",
      },
    });
    expect(jwksFetches).toBe(1);
    expect(logsMatching(gateway.records, "signing keys could not be loaded")).toEqual([
      expect.objectContaining({
        level: "warn",
        err: expect.objectContaining({
          message: "Expected 200 OK from the JSON Web Key Set HTTP response",
        }),
      }),
    ]);
  });

  it("fifteen more from the same address: all 503, none throttled, each counted as keys_unavailable", async () => {
    for (let i = 0; i < 15; i++) {
      const res = await call();
      expect(res.status, `request ${i + 2}: ${res.text}`).toBe(503);
      expect(errorCode(res.text)).toBe("caller_keys_unavailable");
    }
    const counts = callerDenialCounts(await adminText(gateway.adminUrl, "/metrics"));
    expect(counts).toEqual({ "billing/keys_unavailable": 16 });
    const status = JSON.parse(await adminText(gateway.adminUrl, "/status?format=json")) as {
      callerDenials?: { reason: string; caller: string }[];
    };
    expect(status.callerDenials?.[0]).toMatchObject({
      reason: "keys_unavailable",
      caller: `addr:${CALLER}`,
    });
    // One warning for all of them (at most one a minute).
    expect(logsMatching(gateway.records, "signing keys could not be loaded")).toHaveLength(1);
  });

  it("the keys are back: after the fetch backoff the same address is admitted", async () => {
    serving = true;
    // Only Date moves (the backoff's and jose's clock); the throttle runs on the monotonic
    // clock, so a failure counted above would still block this address now.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now() + JWKS_RETRY_AFTER_FAILURE_MS + 1_000);
    const fetchesBefore = jwksFetches;
    const res = await call();
    expect(res.status, res.text).toBe(200);
    expect(jwksFetches).toBe(fetchesBefore + 1);
    expect(JSON.parse(res.text)).toMatchObject({ method: "GET", url: "/echo" });
  });

  it("no service-account token in logs, answers, /status or /metrics", async () => {
    expect(callerTokens).toHaveLength(17);
    expectNoSecrets(
      {
        logs: gateway.lines,
        bodies: answers.map((a) => a.text),
        ...(await adminPages(gateway.adminUrl)),
      },
      callerTokens,
    );
  });
});
