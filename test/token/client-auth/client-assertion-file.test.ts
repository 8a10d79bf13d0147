/**
 * client-assertion-file end to end (issue 16): the file holds a JWT another party signed (here a
 * stand-in for the Kubernetes API server signing a projected service-account token). It is read
 * before every token request, so a rotation between two fetches shows at the endpoint; an
 * expired, missing or malformed one fails with the file named, before anything is sent.
 */
import { randomUUID } from "node:crypto";
import { rename, writeFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { signJws } from "../../../src/token/client-auth/jws.js";
import { makeKeyPair, useVerifyingWorld } from "./support.js";

const ISSUER = "https://kubernetes.default.svc.cluster.local";
const SUBJECT = "system:serviceaccount:team:app";
const AUDIENCE = "api://AzureADTokenExchange";

const cluster = makeKeyPair("rsa");

/** A projected token as the API server would issue it, valid for `lifetimeS` from now. */
function serviceAccountToken(lifetimeS: number): string {
  const now = Math.floor(Date.now() / 1000);
  return signJws(
    { alg: "RS256", kid: "cluster-key" },
    {
      iss: ISSUER,
      sub: SUBJECT,
      aud: AUDIENCE,
      iat: now - 10,
      exp: now + lifetimeS,
      jti: randomUUID(),
    },
    cluster.key,
    "RS256",
  );
}

const world = useVerifyingWorld({
  clients: {
    "workload-app": {
      publicKeyPem: cluster.publicPem,
      issuer: ISSUER,
      subject: SUBJECT,
      audience: AUDIENCE,
    },
  },
});

function source(assertionFile: string) {
  return world.source({
    clientId: "workload-app",
    clientAuth: "client-assertion-file",
    clientAssertionFile: assertionFile,
  });
}

describe("client-assertion-file", () => {
  it("sends the file's JWT, re-read before every request: a token rotated between two fetches reaches the endpoint", async () => {
    const file = world.ws.write("token", `${serviceAccountToken(3600)}\n`);
    const sut = source(file);
    try {
      const first = await sut.source.getToken();
      const sentFirst = world.endpoint.seen.at(-1)!;
      expect(sentFirst.outcome).toBe("granted");
      expect(Object.keys(sentFirst.fields).sort()).toEqual([
        "client_assertion",
        "client_assertion_type",
        "client_id",
        "grant_type",
      ]);
      // The kubelet swaps the file for a fresh token.
      const rotated = serviceAccountToken(3600);
      await writeFile(`${file}.new`, rotated);
      await rename(`${file}.new`, file);
      sut.source.invalidate(first);
      await expect
        .poll(() => sut.source.peekToken()?.value ?? first.value, { timeout: 10_000 })
        .not.toBe(first.value);
      const sentSecond = world.endpoint.seen.at(-1)!;
      expect(sentSecond.outcome).toBe("granted");
      expect(sentSecond.fields.client_assertion).toBe(rotated);
      expect(sentSecond.fields.client_assertion).not.toBe(sentFirst.fields.client_assertion);
      expect(sut.logs.text()).not.toContain(rotated);
    } finally {
      await sut.close();
    }
  });

  it("an expired assertion fails with a clear error and is never sent", async () => {
    const file = world.ws.write("expired", serviceAccountToken(-120));
    const count = world.endpoint.seen.length;
    const sut = source(file);
    try {
      const error = (await sut.source.getToken().catch((e: unknown) => e)) as Error;
      expect(error.message).toMatch(
        /clientAssertionFile .*expired holds an assertion that expired at \d{4}-\d\d-\d\dT.*Z \(1[12]\d s ago\)/,
      );
      expect(world.endpoint.seen.length).toBe(count);
      expect(sut.source.status().lastError?.message).toMatch(/expired at/);
    } finally {
      await sut.close();
    }
  });

  it("a missing file, an empty one and one that is not a JWT each say so", async () => {
    for (const [file, expected] of [
      [`${world.ws.dir}/absent`, /cannot read clientAssertionFile .*absent \(ENOENT\)/],
      [world.ws.write("empty", "\n"), /clientAssertionFile .*empty is empty/],
      [world.ws.write("garbage", "not a jwt"), /clientAssertionFile .*garbage does not hold a JWT/],
    ] as const) {
      const sut = source(file);
      try {
        const error = (await sut.source.getToken().catch((e: unknown) => e)) as Error;
        expect(error.message).toMatch(expected);
      } finally {
        await sut.close();
      }
    }
  });
});
