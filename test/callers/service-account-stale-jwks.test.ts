import { rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { FetchImplementation } from "jose";
import { Agent } from "undici";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import {
  createJwksFetch,
  withFailureBackoff,
  withLastGoodKeys,
} from "../../src/callers/jwks-fetch.js";
import {
  JWKS_COOLDOWN_MS,
  JWKS_MAX_AGE_MS,
  JWKS_RETRY_AFTER_FAILURE_MS,
  JWKS_STALE_LIMIT_MS,
} from "../../src/callers/jwks-source.js";
import { createServiceAccountVerifier } from "../../src/callers/service-account.js";
import type { KubernetesCallersConfig } from "../../src/callers/types.js";
import { generateCertificates } from "../helpers/tls.js";
import {
  AUDIENCE,
  capturingLogger,
  ISSUER,
  jwks,
  type SigningKey,
  serviceAccountToken,
  signingKey,
  tempDir,
} from "./helpers.js";

/**
 * A `jwksUri` whose refresh fails (an API-server outage: 500s, then connection refused) keeps the
 * keys last fetched in force: jose would drop them at its 10-minute refresh and refuse every
 * service-account caller. One warning a minute says how old the kept keys are and why the
 * refresh failed, never with the gateway's token; past JWKS_STALE_LIMIT_MS the kept keys are
 * no longer used (`keys_unavailable`). Real TLS sockets; only Date is faked, to pass jose's max
 * age and cooldown and the backoff.
 */

/** The JWKS server: what it publishes and how it answers, and how often it was asked. */
let published: SigningKey[] = [];
let answer: "jwks" | "500" | "not-a-jwks" = "jwks";
let fetches = 0;
let server: Server;
let port: number;
let uri: string;
let caFile: string;
let caPem: string;
let dir: string;
let remove: () => Promise<void>;
let k1: SigningKey;
let k2: SigningKey;

/** The gateway pod's own token, sent with every fetch; the server wants it. */
const GATEWAY_TOKEN = `eyJhbGciOiJSUzI1NiJ9.${"g".repeat(40)}.${"gatewaySig".repeat(6)}`;
const tokenFile = () => join(dir, "token");
const config = (): KubernetesCallersConfig => ({
  issuer: ISSUER,
  audiences: [AUDIENCE],
  jwksUri: uri,
  caFile,
  jwksTokenFile: tokenFile(),
});
const advance = (ms: number) => vi.setSystemTime(Date.now() + ms);

const listen = () => new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
/** Connection refused from now on: nothing listens on the port (and no kept-alive socket). */
const stopListening = async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
};

beforeAll(async () => {
  const temp = await tempDir();
  ({ dir, remove } = temp);
  const [pki, a, b] = await Promise.all([
    generateCertificates(),
    signingKey("k1"),
    signingKey("k2"),
  ]);
  [k1, k2] = [a, b];
  caPem = pki.caPem;
  caFile = join(dir, "ca.pem");
  await writeFile(caFile, pki.caPem);
  server = createServer({ cert: pki.certPem, key: pki.keyPem }, (req, res) => {
    fetches += 1;
    if (req.url !== "/openid/v1/jwks" || req.headers.authorization !== `Bearer ${GATEWAY_TOKEN}`) {
      res.writeHead(401).end();
    } else if (answer === "500") res.writeHead(500).end("etcdserver: leader changed");
    else if (answer === "not-a-jwks") res.writeHead(200).end('{"kind":"Status"}');
    else res.writeHead(200, { "content-type": "application/json" }).end(jwks(...published));
  });
  port = 0;
  await listen();
  port = (server.address() as AddressInfo).port;
  uri = `https://127.0.0.1:${port}/openid/v1/jwks`;
});
beforeEach(async () => {
  await writeFile(tokenFile(), GATEWAY_TOKEN);
  vi.useFakeTimers({ toFake: ["Date"] });
});
afterEach(async () => {
  vi.useRealTimers();
  published = [];
  answer = "jwks";
  fetches = 0;
  if (!server.listening) await listen();
  await rm(tokenFile(), { force: true });
});
afterAll(async () => {
  await stopListening();
  await remove();
});

describe("jwksUri: a failed refresh keeps the keys last fetched", () => {
  it("500 and connection refused past the max age: known keys still verify, one warning a minute, no token logged", async () => {
    published = [k1];
    const { logger, lines, records } = capturingLogger();
    const warnings = () => records.filter((r) => r.level === "warn");
    const verifier = createServiceAccountVerifier(config(), {
      logger,
      extraCaCertsFile: undefined,
    });
    const callerTokens: string[] = [];
    const byKey = async (key: SigningKey) => {
      const jwt = await serviceAccountToken(key);
      callerTokens.push(jwt);
      return jwt;
    };
    try {
      expect(await verifier.verify(await byKey(k1))).toMatchObject({ ok: true });
      expect(fetches).toBe(1);

      // The API server goes down for an upgrade: jose's refresh at max age gets a 500.
      answer = "500";
      advance(JWKS_MAX_AGE_MS + 1_000);
      expect(await verifier.verify(await byKey(k1))).toMatchObject({
        ok: true,
        caller: { kind: "serviceAccount", namespace: "payments", name: "billing-client" },
      });
      expect(fetches).toBe(2);
      expect(warnings()).toEqual([
        expect.objectContaining({
          msg: "callers.kubernetes: the JWKS refresh failed; verifying with the keys last fetched",
          keysAgeSeconds: (JWKS_MAX_AGE_MS + 1_000) / 1000,
          staleLimitSeconds: JWKS_STALE_LIMIT_MS / 1000,
          problem: "answered 500",
        }),
      ]);

      // An unknown kid still makes jose try a refetch after its cooldown; it fails too, the
      // token is refused for its key (as before the outage), and the minute is not over: no
      // second warning.
      advance(JWKS_COOLDOWN_MS + 1_000);
      expect(await verifier.verify(await byKey(k2))).toMatchObject({
        ok: false,
        reason: "invalid_token",
        message: "the service-account token is signed by a key the cluster does not publish",
      });
      expect(fetches).toBe(3);
      expect(await verifier.verify(await byKey(k1))).toMatchObject({ ok: true });
      expect(warnings()).toHaveLength(1);

      // Now nothing listens: connection refused, the kept keys still verify.
      await stopListening();
      advance(JWKS_MAX_AGE_MS + 1_000);
      expect(await verifier.verify(await byKey(k1))).toMatchObject({ ok: true });
      expect(warnings()).toHaveLength(2);
      expect(warnings()[1]).toMatchObject({
        keysAgeSeconds: (2 * JWKS_MAX_AGE_MS + JWKS_COOLDOWN_MS + 3_000) / 1000,
        problem: expect.stringContaining("ECONNREFUSED"),
      });
      expect(fetches).toBe(3);

      // The API server is back, with k2: the next refresh brings it.
      await listen();
      answer = "jwks";
      published = [k1, k2];
      advance(JWKS_MAX_AGE_MS + 1_000);
      expect(await verifier.verify(await byKey(k2))).toMatchObject({ ok: true });
      expect(fetches).toBe(4);
      expect(records.at(-1)).toMatchObject({
        level: "info",
        msg: "callers.kubernetes: the JWKS refresh succeeded again; the keys are current",
      });
      expect(warnings()).toHaveLength(2);
    } finally {
      await verifier.close();
    }
    const text = lines.join("");
    for (const secret of [GATEWAY_TOKEN, ...callerTokens]) {
      expect(text).not.toContain(secret.split(".")[1]);
      expect(text).not.toContain(secret.split(".")[2]);
    }
  });

  it("keys that cannot be refreshed for longer than the stale limit are refused as keys_unavailable", async () => {
    published = [k1];
    const { logger, records } = capturingLogger();
    const verifier = createServiceAccountVerifier(config(), {
      logger,
      extraCaCertsFile: undefined,
    });
    const fetchedAt = Date.now();
    try {
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      answer = "500";
      // A minute short of the limit the kept keys still count…
      vi.setSystemTime(fetchedAt + JWKS_STALE_LIMIT_MS - 60_000);
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(fetches).toBe(2);

      // …past it (at jose's next refresh) they do not: the keys are unavailable, which is no
      // fault of the caller's, and the log says why.
      vi.setSystemTime(fetchedAt + JWKS_STALE_LIMIT_MS + JWKS_MAX_AGE_MS);
      expect(await verifier.verify(await serviceAccountToken(k1))).toEqual({
        ok: false,
        reason: "keys_unavailable",
        message: "the cluster's service-account signing keys could not be loaded",
      });
      expect(fetches).toBe(3);
      expect(records.at(-1)).toMatchObject({
        level: "warn",
        msg: "callers.kubernetes: the cluster's signing keys could not be loaded",
        err: {
          message:
            "the JWKS refresh failed (answered 500) and the keys fetched 24 h 10 min ago are past the 24 h limit for keys that cannot be refreshed",
        },
      });

      // Within the backoff nothing is fetched; after it, a server that works again admits.
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({
        reason: "keys_unavailable",
      });
      expect(fetches).toBe(3);
      answer = "jwks";
      advance(JWKS_RETRY_AFTER_FAILURE_MS + 1_000);
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(fetches).toBe(4);
      expect(records.at(-1)).toMatchObject({
        level: "info",
        msg: "callers.kubernetes: the JWKS refresh succeeded again; the keys are current",
      });
    } finally {
      await verifier.close();
    }
  });
});

describe("the JWKS fetch layers", () => {
  let agent: Agent;
  let fetchJwks: FetchImplementation;
  const options = () => ({
    method: "GET" as const,
    redirect: "manual" as const,
    headers: new Headers({ accept: "application/json" }),
    signal: AbortSignal.timeout(5_000),
  });
  const keysIn = async (response: Response) =>
    ((await response.json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);

  beforeEach(async () => {
    agent = new Agent({ connect: { ca: caPem } });
    const token = { read: async () => GATEWAY_TOKEN };
    fetchJwks = withLastGoodKeys(withFailureBackoff(createJwksFetch(agent, token)));
  });
  afterEach(async () => {
    await agent.close();
  });

  it("before any good fetch a failure goes through, and the backoff fails at once without fetching", async () => {
    answer = "500";
    expect((await fetchJwks(uri, options())).status).toBe(500);
    await expect(fetchJwks(uri, options())).rejects.toThrow(
      "the last JWKS fetch failed (answered 500); the next is allowed in 5 s",
    );
    expect(fetches).toBe(1);
    answer = "jwks";
    published = [k1];
    advance(JWKS_RETRY_AFTER_FAILURE_MS);
    const response = await fetchJwks(uri, options());
    expect(response.status).toBe(200);
    expect(await keysIn(response)).toEqual(["k1"]);
    expect(fetches).toBe(2);
  });

  it("a 200 that is not a JWKS is a failure: the kept keys answer, and during the backoff without a fetch", async () => {
    published = [k1];
    expect(await keysIn(await fetchJwks(uri, options()))).toEqual(["k1"]);
    answer = "not-a-jwks";
    published = [k2];
    const kept = await fetchJwks(uri, options());
    expect(kept.status).toBe(200);
    expect(await keysIn(kept)).toEqual(["k1"]);
    expect(fetches).toBe(2);
    // Within JWKS_RETRY_AFTER_FAILURE_MS: the kept keys, nothing sent.
    answer = "jwks";
    expect(await keysIn(await fetchJwks(uri, options()))).toEqual(["k1"]);
    expect(fetches).toBe(2);
    advance(JWKS_RETRY_AFTER_FAILURE_MS);
    expect(await keysIn(await fetchJwks(uri, options()))).toEqual(["k2"]);
    expect(fetches).toBe(3);
  });
});
