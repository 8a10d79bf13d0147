/**
 * tls-client-auth end to end (issue 16, RFC 8705 §2): the token endpoint asks for a client
 * certificate and authenticates the client by it; the request carries only client_id. Without
 * the certificate the client is refused; a rotated certificate is presented on the next
 * connection without a restart.
 */
import { X509Certificate } from "node:crypto";
import { rename, writeFile } from "node:fs/promises";
import { generate } from "selfsigned";
import { describe, expect, it } from "vitest";
import { sourceFor, useVerifyingWorld } from "./support.js";

const world = useVerifyingWorld({ clientCa: true });

/** A client certificate (EC P-256, clientAuth EKU) signed by the test CA. */
async function clientCertificate(cn: string): Promise<{ certPem: string; keyPem: string }> {
  const made = await generate([{ name: "commonName", value: cn }], {
    keyType: "ec",
    curve: "P-256",
    algorithm: "sha256",
    ca: { key: world.pki.caKeyPem, cert: world.pki.caPem },
    extensions: [
      { name: "basicConstraints", cA: false, critical: true },
      { name: "keyUsage", digitalSignature: true, critical: true },
      { name: "extKeyUsage", clientAuth: true },
    ],
  });
  return { certPem: made.cert, keyPem: made.private };
}

const fingerprintOf = (pem: string) => new X509Certificate(pem).fingerprint256;

describe("tls-client-auth", () => {
  it("authenticates with the certificate of tokenTls and sends only client_id", async () => {
    const client = await clientCertificate("mtls-app");
    world.endpoint.clients.set("mtls-app", {
      certificateFingerprint256: fingerprintOf(client.certPem),
    });
    const sut = sourceFor({
      tokenUrl: world.endpoint.tokenUrl,
      clientId: "mtls-app",
      clientAuth: "tls-client-auth",
      tokenTls: {
        caFile: world.caFile,
        certFile: world.ws.write("app.crt", client.certPem),
        keyFile: world.ws.write("app.key", client.keyPem),
      },
    });
    try {
      await sut.source.getToken();
      const seen = world.endpoint.seen.at(-1)!;
      expect(seen.outcome).toBe("granted");
      expect(seen.fields).toEqual({ grant_type: "client_credentials", client_id: "mtls-app" });
      expect(seen.headers.authorization).toBeUndefined();
    } finally {
      await sut.close();
    }
  });

  it("without a client certificate the endpoint refuses the client (token_rejected)", async () => {
    world.endpoint.clients.set("no-cert", { certificateFingerprint256: "AA:BB" });
    // Validation refuses this configuration; built directly to see what the endpoint does.
    const sut = sourceFor({
      tokenUrl: world.endpoint.tokenUrl,
      clientId: "no-cert",
      clientAuth: "tls-client-auth",
      tokenTls: { caFile: world.caFile },
    });
    try {
      await expect(sut.source.getToken()).rejects.toMatchObject({ code: "BP_ERR_TOKEN_REJECTED" });
      expect(world.endpoint.seen.at(-1)!.outcome).toBe(
        "invalid_client: a client certificate is required",
      );
    } finally {
      await sut.close();
    }
  });

  it("a rotated certificate and key are presented on the next connection, without a restart", async () => {
    const before = await clientCertificate("rotating-app");
    const after = await clientCertificate("rotating-app");
    world.endpoint.clients.set("rotating-app", {
      certificateFingerprint256: fingerprintOf(before.certPem),
    });
    const certFile = world.ws.write("rot.crt", before.certPem);
    const keyFile = world.ws.write("rot.key", before.keyPem);
    const sut = sourceFor({
      tokenUrl: world.endpoint.tokenUrl,
      clientId: "rotating-app",
      clientAuth: "tls-client-auth",
      tokenTls: { caFile: world.caFile, certFile, keyFile },
    });
    try {
      const first = await sut.source.getToken();
      expect(world.endpoint.seen.at(-1)!.peerFingerprint256).toBe(fingerprintOf(before.certPem));
      // The IdP now knows only the new certificate; both files are replaced.
      world.endpoint.clients.set("rotating-app", {
        certificateFingerprint256: fingerprintOf(after.certPem),
      });
      await writeFile(`${keyFile}.new`, after.keyPem);
      await writeFile(`${certFile}.new`, after.certPem);
      await rename(`${keyFile}.new`, keyFile);
      await rename(`${certFile}.new`, certFile);
      sut.source.invalidate(first);
      await expect
        .poll(() => sut.source.peekToken()?.value ?? first.value, { timeout: 10_000 })
        .not.toBe(first.value);
      const seen = world.endpoint.seen.at(-1)!;
      expect(seen.outcome).toBe("granted");
      expect(seen.peerFingerprint256).toBe(fingerprintOf(after.certPem));
    } finally {
      await sut.close();
    }
  });
});
