import { writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createServiceAccountVerifier } from "../../src/callers/service-account.js";
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

/** The API server's /openid/v1/jwks as a test controls it: what it publishes, how often asked. */
let published: SigningKey[] = [];
let status = 200;
let fetches = 0;
let server: Server;
let uri: string;
let caFile: string;
let remove: () => Promise<void>;
let k1: SigningKey;
let k2: SigningKey;

beforeAll(async () => {
  const temp = await tempDir();
  remove = temp.remove;
  const [pki, a, b] = await Promise.all([
    generateCertificates(),
    signingKey("k1"),
    signingKey("k2"),
  ]);
  [k1, k2] = [a, b];
  caFile = join(temp.dir, "ca.pem");
  await writeFile(caFile, pki.caPem);
  server = createServer({ cert: pki.certPem, key: pki.keyPem }, (req, res) => {
    fetches += 1;
    if (req.url !== "/openid/v1/jwks") res.writeHead(404).end();
    else res.writeHead(status, { "content-type": "application/json" }).end(jwks(...published));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  uri = `https://127.0.0.1:${(server.address() as AddressInfo).port}/openid/v1/jwks`;
});
afterEach(() => {
  vi.useRealTimers();
  published = [];
  status = 200;
  fetches = 0;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await remove();
});

describe("service-account jwksUri", () => {
  it("fetches the keys over TLS trusting caFile; an unknown kid refetches at most once per 30 s cooldown", async () => {
    // Only Date moves: jose times its cooldown with Date.now, sockets and TLS keep real time.
    vi.useFakeTimers({ toFake: ["Date"] });
    const verifier = createServiceAccountVerifier(
      { issuer: ISSUER, audiences: [AUDIENCE], jwksUri: uri, caFile },
      { extraCaCertsFile: undefined },
    );
    try {
      published = [k1];
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(fetches).toBe(1);

      // The cluster rotates k2 in. Within the cooldown a token under k2 cannot make jose refetch,
      // and neither can a flood of made-up kids.
      published = [k1, k2];
      const byK2 = await serviceAccountToken(k2);
      expect(await verifier.verify(byK2)).toMatchObject({
        ok: false,
        message: "the service-account token is signed by a key the cluster does not publish",
      });
      const strangers = await Promise.all(
        Array.from({ length: 5 }, (_, i) => signingKey(`made-up-${i}`).then(serviceAccountToken)),
      );
      const results = await Promise.all(strangers.map((jwt) => verifier.verify(jwt)));
      expect(results.every((r) => !r.ok)).toBe(true);
      expect(fetches).toBe(1);

      // After the cooldown the unknown kid triggers one refetch, which finds k2.
      vi.setSystemTime(Date.now() + 31_000);
      expect(await verifier.verify(await serviceAccountToken(k2))).toMatchObject({ ok: true });
      expect(fetches).toBe(2);
      expect(await verifier.verify(strangers[0]!)).toMatchObject({ ok: false });
      expect(await verifier.verify(await serviceAccountToken(k1))).toMatchObject({ ok: true });
      expect(fetches).toBe(2);
    } finally {
      await verifier.close();
    }
  });

  it("an untrusted certificate or a failing key URL refuses tokens and logs why, without the token", async () => {
    published = [k1];
    const { logger, lines, records } = capturingLogger();
    const untrusting = createServiceAccountVerifier(
      { issuer: ISSUER, audiences: [AUDIENCE], jwksUri: uri },
      { logger, extraCaCertsFile: undefined },
    );
    const jwt = await serviceAccountToken(k1);
    try {
      expect(await untrusting.verify(jwt)).toEqual({
        ok: false,
        reason: "keys_unavailable",
        message: "the cluster's service-account signing keys could not be loaded",
      });
      expect(fetches).toBe(0);
      expect(records.at(-1)).toMatchObject({ level: "warn" });
    } finally {
      await untrusting.close();
    }

    status = 500;
    const failing = createServiceAccountVerifier(
      { issuer: ISSUER, audiences: [AUDIENCE], jwksUri: uri, caFile },
      { logger, extraCaCertsFile: undefined },
    );
    try {
      expect(await failing.verify(jwt)).toMatchObject({ ok: false, reason: "keys_unavailable" });
      expect(fetches).toBe(1);
    } finally {
      await failing.close();
    }
    expect(lines.join("")).not.toContain(jwt.split(".")[2]);
  });
});
