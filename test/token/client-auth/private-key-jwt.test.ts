/**
 * private-key-jwt end to end (issue 16): a real HTTPS token endpoint verifies each assertion with
 * the registered PUBLIC key for RS256, PS256, ES256 and EdDSA, checks kid and x5t#S256, and
 * refuses replays; a rotated key file is picked up without a restart.
 */
import { rename, writeFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import type { AssertionAlgorithm } from "../../../src/config/proxy-config.js";
import { certificateFor, type KeyKind, makeKeyPair, useVerifyingWorld } from "./support.js";
import { thumbprintOf } from "./verifying-endpoint.js";

const world = useVerifyingWorld();

const CASES: [AssertionAlgorithm, KeyKind, "inferred" | "explicit"][] = [
  ["RS256", "rsa", "inferred"],
  ["PS256", "rsa", "explicit"],
  ["ES256", "ec", "inferred"],
  ["EdDSA", "ed25519", "inferred"],
];

describe("private-key-jwt against an endpoint that verifies the signature", () => {
  for (const [algorithm, kind, how] of CASES) {
    it(`${algorithm} (${how}) with kid: granted, and the assertion is what RFC 7523 §3 asks`, async () => {
      const pair = makeKeyPair(kind);
      const clientId = `client-${algorithm}`;
      world.endpoint.clients.set(clientId, {
        publicKeyPem: pair.publicPem,
        keyId: `kid-${algorithm}`,
      });
      const sut = world.source({
        clientId,
        clientAuth: "private-key-jwt",
        clientKeyFile: world.ws.write(`${algorithm}.key`, pair.privatePem),
        clientKeyId: `kid-${algorithm}`,
        ...(how === "explicit" ? { assertion: { algorithm } } : {}),
      });
      try {
        const token = await sut.source.getToken();
        expect(token.value).toMatch(new RegExp(`^at-${clientId}-`));
        const seen = world.endpoint.seen.at(-1)!;
        expect(seen.outcome).toBe("granted");
        expect(Object.keys(seen.fields).sort()).toEqual([
          "client_assertion",
          "client_assertion_type",
          "client_id",
          "grant_type",
        ]);
        expect(seen.headers.authorization).toBeUndefined();
        expect(seen.jwtHeader).toEqual({ alg: algorithm, typ: "JWT", kid: `kid-${algorithm}` });
        const claims = seen.jwtPayload!;
        expect(claims).toMatchObject({
          iss: clientId,
          sub: clientId,
          aud: world.endpoint.tokenUrl,
        });
        expect(claims.exp as number).toBe((claims.iat as number) + 60);
        expect(claims.jti).toMatch(/^[0-9a-f-]{36}$/);
        // A second assertion is a new one (jti unique; the endpoint refuses replays).
        sut.source.invalidate(token);
        await expect
          .poll(() => sut.source.peekToken()?.value ?? token.value, { timeout: 10_000 })
          .not.toBe(token.value);
        const [first, second] = world.endpoint.seen.slice(-2);
        expect(second!.outcome).toBe("granted");
        expect(second!.jwtPayload!.jti).not.toBe(first!.jwtPayload!.jti);
      } finally {
        await sut.close();
      }
    });
  }

  it("clientCertificateFile adds the x5t#S256 the endpoint requires (Entra ID); assertion.audience replaces aud", async () => {
    const pair = makeKeyPair("rsa");
    const certPem = await certificateFor(pair, "rsa");
    world.endpoint.clients.set("entra-app", {
      publicKeyPem: pair.publicPem,
      x5tS256: thumbprintOf(certPem),
      audience: "https://login.example.test/tenant/v2.0",
    });
    const sut = world.source({
      clientId: "entra-app",
      clientAuth: "private-key-jwt",
      clientKeyFile: world.ws.write("entra.key", pair.privatePem),
      clientCertificateFile: world.ws.write("entra.crt", certPem),
      assertion: { audience: "https://login.example.test/tenant/v2.0", lifetime: "2m" },
    });
    try {
      await sut.source.getToken();
      const seen = world.endpoint.seen.at(-1)!;
      expect(seen.outcome).toBe("granted");
      expect(seen.jwtHeader!["x5t#S256"]).toBe(thumbprintOf(certPem));
      expect(seen.jwtPayload!.exp as number).toBe((seen.jwtPayload!.iat as number) + 120);
    } finally {
      await sut.close();
    }
  });

  it("a key the endpoint does not know is refused (invalid_client), and the key never leaves the proxy", async () => {
    const registered = makeKeyPair("ec");
    const other = makeKeyPair("ec");
    world.endpoint.clients.set("wrong-key", { publicKeyPem: registered.publicPem });
    const sut = world.source({
      clientId: "wrong-key",
      clientAuth: "private-key-jwt",
      clientKeyFile: world.ws.write("other.key", other.privatePem),
    });
    try {
      await expect(sut.source.getToken()).rejects.toMatchObject({ code: "BP_ERR_TOKEN_REJECTED" });
      expect(world.endpoint.seen.at(-1)!.outcome).toMatch(/signature does not verify/);
      const body = other.privatePem.split("\n")[1]!;
      expect(sut.logs.text()).not.toContain(body);
      expect(sut.logs.text()).not.toContain(world.endpoint.seen.at(-1)!.fields.client_assertion!);
    } finally {
      await sut.close();
    }
  });

  it("a rotated key file is used for the next assertion without a restart, and the old token is dropped", async () => {
    const before = makeKeyPair("ec");
    const after = makeKeyPair("ec");
    world.endpoint.clients.set("rotating", { publicKeyPem: before.publicPem });
    const keyFile = world.ws.write("rotating.key", before.privatePem);
    const sut = world.source({
      clientId: "rotating",
      clientAuth: "private-key-jwt",
      clientKeyFile: keyFile,
    });
    try {
      const first = await sut.source.getToken();
      expect(world.endpoint.seen.at(-1)!.outcome).toBe("granted");
      // The IdP now knows only the new key; the file is replaced atomically, as tooling does.
      world.endpoint.clients.set("rotating", { publicKeyPem: after.publicPem });
      await writeFile(`${keyFile}.new`, after.privatePem);
      await rename(`${keyFile}.new`, keyFile);
      const second = await sut.source.getToken().then(async (t) => {
        // Without a poll interval the rotation is seen by the next read; force one.
        if (t.value === first.value) {
          sut.source.invalidate(t);
          return sut.source.getToken();
        }
        return t;
      });
      expect(second.value).not.toBe(first.value);
      expect(world.endpoint.seen.at(-1)!.outcome).toBe("granted");
    } finally {
      await sut.close();
    }
  });

  it("a certificate that is not the key's fails before any request, naming both files", async () => {
    const pair = makeKeyPair("rsa");
    const stranger = makeKeyPair("rsa");
    const certPem = await certificateFor(stranger, "rsa");
    const count = world.endpoint.seen.length;
    const sut = world.source({
      clientId: "mismatch",
      clientAuth: "private-key-jwt",
      clientKeyFile: world.ws.write("mismatch.key", pair.privatePem),
      clientCertificateFile: world.ws.write("mismatch.crt", certPem),
    });
    try {
      const error = await sut.source.getToken().catch((e: unknown) => e);
      expect(error).toMatchObject({ code: "BP_ERR_TOKEN_UNAVAILABLE" });
      expect(String((error as Error).message)).toMatch(
        /clientCertificateFile .*mismatch\.crt is not the certificate of the key in clientKeyFile .*mismatch\.key/,
      );
      expect(world.endpoint.seen.length).toBe(count);
    } finally {
      await sut.close();
    }
  });
});
