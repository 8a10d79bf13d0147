import { X509Certificate } from "node:crypto";
import { createServer, type Server } from "node:https";
import { connect } from "node:tls";
import { describe, expect, it } from "vitest";
import { createTestPki, generateCertificates, type ServerCertificate } from "../helpers/tls.js";

/** Serve `cert` on 127.0.0.1 and try a TLS handshake that trusts `caPem`; returns the error code or "ok". */
async function handshake(
  cert: ServerCertificate,
  caPem: string,
  servername?: string,
): Promise<string> {
  const server: Server = createServer({ cert: cert.certPem, key: cert.keyPem }, (_req, res) =>
    res.end(),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  try {
    return await new Promise<string>((resolve) => {
      const socket = connect(
        { host: "127.0.0.1", port, ca: caPem, ...(servername ? { servername } : {}) },
        () => {
          socket.destroy();
          resolve("ok");
        },
      );
      socket.on("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
  } finally {
    server.close();
    server.closeAllConnections();
  }
}

describe("generateCertificates and the test PKI", () => {
  it("makes a CA and a leaf for 127.0.0.1, ::1 and localhost", async () => {
    const generated = await generateCertificates();
    const ca = new X509Certificate(generated.caPem);
    const leaf = new X509Certificate(generated.certPem);
    expect(ca.ca).toBe(true);
    expect(leaf.ca).toBe(false);
    expect(leaf.verify(ca.publicKey)).toBe(true);
    expect(leaf.checkIssued(ca)).toBe(true);
    expect(leaf.subjectAltName).toBe(
      "IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, DNS:localhost",
    );
    expect(await handshake(generated, generated.caPem)).toBe("ok");
    expect(await handshake(generated, generated.caPem, "localhost")).toBe("ok");
  });

  it("honours hosts and validity dates", async () => {
    const notBefore = new Date("2030-01-01T00:00:00Z");
    const generated = await generateCertificates({ hosts: ["api.test"], notBefore, days: 2 });
    const leaf = new X509Certificate(generated.certPem);
    expect(leaf.subjectAltName).toBe("DNS:api.test");
    expect(new Date(leaf.validFrom).toISOString()).toBe("2030-01-01T00:00:00.000Z");
    expect(new Date(leaf.validTo).toISOString()).toBe("2030-01-03T00:00:00.000Z");
    await expect(generateCertificates({ hosts: [] })).rejects.toThrow(TypeError);
  });

  it("gives one certificate per failure mode, each failing verification for its reason", async () => {
    const pki = await createTestPki();
    expect(await handshake(pki.good, pki.caPem)).toBe("ok");
    expect(await handshake(pki.wrongHost, pki.caPem)).toBe("ERR_TLS_CERT_ALTNAME_INVALID");
    expect(await handshake(pki.expired, pki.caPem)).toBe("CERT_HAS_EXPIRED");
    expect(await handshake(pki.otherCa, pki.caPem)).toBe("UNABLE_TO_VERIFY_LEAF_SIGNATURE");
    // Each is fine on its own terms, so the failure above is the one intended.
    expect(await handshake(pki.otherCa, pki.otherCa.caPem)).toBe("ok");
    expect(await handshake(pki.wrongHost, pki.caPem, "wrong-host.invalid")).toBe("ok");
  });
});
