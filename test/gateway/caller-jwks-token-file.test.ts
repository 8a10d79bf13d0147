import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { useServiceAccountGateway } from "../callers/support/service-account-gateway.js";
import { logsMatching } from "../helpers/app-under-test.js";
import {
  errorCode,
  es256SigningKey,
  type ServiceAccountSigningKey,
} from "../helpers/callers-fixture.js";

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
  const bench = useServiceAccountGateway({ files: { [TOKEN_FILE]: GATEWAY_TOKEN } });
  let key: ServiceAccountSigningKey;
  /** The `Authorization` of each JWKS request. */
  const received = () => bench.jwks.authorizations();

  const call = async () => bench.get(await bench.token(key.privateKey));

  beforeAll(async () => {
    key = await es256SigningKey("k1");
    bench.jwks.publish(key);
    // What the API server does: 401 to a client it cannot authenticate.
    bench.jwks.requiredToken = GATEWAY_TOKEN;
  });

  it("an anonymous JWKS fetch is refused (401), so the caller gets 503 and the log says why", async () => {
    const res = await call();
    expect(res.status).toBe(503);
    expect(errorCode(res.text)).toBe("caller_keys_unavailable");
    expect(res.headers["retry-after"]).toBe("5");
    expect(res.text).toContain("signing keys could not be loaded");
    expect(received()).toEqual([undefined]);
    expect(logsMatching(bench.gateway.records, "signing keys could not be loaded")).toEqual([
      expect.objectContaining({
        err: expect.objectContaining({
          message: expect.stringContaining("set callers.kubernetes.jwksTokenFile"),
        }),
      }),
    ]);
  });

  it("a reload adding jwksTokenFile admits the caller: the fetch presents the token", async () => {
    const next = await bench.gateway.load(bench.document({ jwksTokenFile: TOKEN_FILE }));
    expect(next.callers.kubernetes?.jwksTokenFile).toBe(join(bench.gateway.dir, TOKEN_FILE));
    expect(await bench.gateway.app.reload(next)).toEqual({ outcome: "applied" });
    const res = await call();
    expect(res.status, res.text).toBe(200);
    expect(received()).toEqual([undefined, `Bearer ${GATEWAY_TOKEN}`]);
    // The keys are cached: a second caller costs no fetch.
    expect((await call()).status).toBe(200);
    expect(received()).toHaveLength(2);
  });

  it("the gateway's token is in no log line, answer, /status or /metrics", async () => {
    expect(bench.answers).toHaveLength(3);
    await bench.expectNothingLeaked([GATEWAY_TOKEN]);
  });
});
