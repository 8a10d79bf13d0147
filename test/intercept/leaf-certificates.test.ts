/**
 * Leaf certificates signed by the interception CA (intercept/leaf-certificates.ts), checked the
 * way clients check them: node's X509Certificate for issuer, SAN, validity and signature, and
 * real TLS handshakes in which a client that trusts only the CA verifies the host name.
 */
import { X509Certificate } from "node:crypto";
import { once } from "node:events";
import { createServer, type Server, type Socket } from "node:net";
import { connect, TLSSocket as ServerTlsSocket, type TLSSocket } from "node:tls";
import * as x509 from "@peculiar/x509";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { type InterceptCa, loadInterceptCa } from "../../src/config/intercept-ca.js";
import { handshakeFailureReason } from "../../src/intercept/handshake-failure.js";
import {
  createLeafCertificates,
  INTERCEPT_ALPN_PROTOCOLS,
  type LeafCertificates,
} from "../../src/intercept/leaf-certificates.js";
import { curl } from "../helpers/curl.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import { waitFor } from "../helpers/wait.js";

const HOUR_MS = 3_600_000;
const files = useCaFiles();

describe.each(["ec-p256", "rsa-2048"] as const)("leaf certificates of an %s CA", (variant) => {
  let written: CaFiles;
  let ca: InterceptCa;
  let leaves: LeafCertificates;
  beforeAll(async () => {
    written = await files.writeCa(variant);
    ca = await loadInterceptCa(written);
    leaves = createLeafCertificates({ ca });
  });

  it("names the host, is issued and signed by the CA, and lives 24 h from an hour ago", async () => {
    const before = Date.now();
    const leaf = await leaves.leafFor("api.example.test");
    const after = Date.now();
    const cert = new X509Certificate(leaf.certPem);
    expect(cert.subject).toBe("CN=api.example.test");
    expect(cert.subjectAltName).toBe("DNS:api.example.test");
    expect(cert.issuer).toBe(ca.certificate.subject);
    expect(cert.ca).toBe(false);
    expect(cert.keyUsage).toEqual(["1.3.6.1.5.5.7.3.1"]); // extendedKeyUsage serverAuth
    expect(cert.checkIssued(ca.certificate)).toBe(true);
    expect(cert.verify(ca.certificate.publicKey)).toBe(true);
    const validFrom = Date.parse(cert.validFrom);
    const validTo = Date.parse(cert.validTo);
    expect(validFrom).toBeGreaterThanOrEqual(before - HOUR_MS - 1_000);
    expect(validFrom).toBeLessThanOrEqual(after - HOUR_MS);
    expect(validTo).toBeGreaterThanOrEqual(before + 24 * HOUR_MS - 1_000);
    expect(validTo).toBeLessThanOrEqual(after + 24 * HOUR_MS);
    expect([leaf.notBefore.getTime(), leaf.notAfter.getTime()]).toEqual([validFrom, validTo]);
    // The leaf key is the certificate's.
    expect(cert.checkPrivateKey((await import("node:crypto")).createPrivateKey(leaf.keyPem))).toBe(
      true,
    );
  });

  it(`signs with ${variant === "rsa-2048" ? "RSASSA-PKCS1-v1_5" : "ECDSA"} SHA-256, names the issuer byte for byte, and points at the CA's key`, async () => {
    const leaf = new x509.X509Certificate((await leaves.leafFor("api.example.test")).certPem);
    const caCert = new x509.X509Certificate(ca.certificate.raw);
    expect(leaf.signatureAlgorithm).toMatchObject({
      name: variant === "rsa-2048" ? "RSASSA-PKCS1-v1_5" : "ECDSA",
      hash: { name: "SHA-256" },
    });
    expect(Buffer.from(leaf.issuerName.toArrayBuffer())).toEqual(
      Buffer.from(caCert.subjectName.toArrayBuffer()),
    );
    // Always an authorityKeyIdentifier (strict verifiers want one): the CA's own key id when it
    // has one (OpenSSL compares the two), else the SHA-1 of its key.
    const caKeyId =
      caCert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId ??
      Buffer.from(await caCert.publicKey.getKeyIdentifier()).toString("hex");
    expect(leaf.getExtension(x509.AuthorityKeyIdentifierExtension)?.keyId).toBe(caKeyId);
    expect(leaf.getExtension(x509.BasicConstraintsExtension)).toMatchObject({
      ca: false,
      critical: true,
    });
    expect(leaf.getExtension(x509.KeyUsagesExtension)?.usages).toBe(
      x509.KeyUsageFlags.digitalSignature,
    );
  });

  it("sends the CA after the leaf (the chain a client builds on)", async () => {
    const { certPem } = await leaves.leafFor("api.example.test");
    const blocks = certPem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g);
    expect(blocks).toHaveLength(2);
    expect(new X509Certificate(blocks![1]!).fingerprint256).toBe(ca.fingerprintSha256);
  });
});

describe("leaf certificates: names", () => {
  let leaves: LeafCertificates;
  beforeAll(async () => {
    leaves = createLeafCertificates({ ca: await loadInterceptCa(await files.writeCa("ec-p256")) });
  });

  it("names an IP literal as an IP SAN (clients never match an IP against a DNS name)", async () => {
    const v4 = new X509Certificate((await leaves.leafFor("10.0.0.5")).certPem);
    expect(v4.subjectAltName).toBe("IP Address:10.0.0.5");
    const v6 = new X509Certificate((await leaves.leafFor("[::1]")).certPem);
    expect(v6.subjectAltName).toBe("IP Address:0:0:0:0:0:0:0:1");
    expect(v6.subject).toBe("CN=::1");
  });

  it("gives every leaf its own random, positive serial number", async () => {
    const serials = await Promise.all(
      ["a.example.test", "b.example.test", "c.example.test"].map(
        async (host) => (await leaves.leafFor(host)).serialNumber,
      ),
    );
    expect(new Set(serials).size).toBe(3);
    for (const serial of serials) expect(serial).toMatch(/^[4-7][0-9a-f]{31}$/);
    const cert = new X509Certificate((await leaves.leafFor("a.example.test")).certPem);
    expect(cert.serialNumber.toLowerCase()).toBe(serials[0]);
  });

  it.each(["", "*.example.test", "a b.example.test", "api.example.test:443", "-bad.example.test"])(
    "refuses to make a leaf for %j",
    async (host) => {
      await expect(leaves.leafFor(host)).rejects.toThrow(
        /expected a host name or IP address for a leaf certificate/,
      );
    },
  );
});

describe("leaf certificates in a real TLS handshake", () => {
  let written: CaFiles;
  let leaves: LeafCertificates;
  let server: Server | undefined;
  const sockets = new Set<Socket>();
  beforeAll(async () => {
    written = await files.writeCa("ec-p256");
    leaves = createLeafCertificates({ ca: await loadInterceptCa(written) });
  });
  afterEach(async () => {
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    server?.close();
    server = undefined;
  });

  /**
   * A server that turns each accepted socket into TLS with the leaf of `host`, as a terminated
   * CONNECT does (the socket is already open when TLS begins), and answers "hello".
   */
  async function startTerminating(
    host: string,
  ): Promise<{ port: number; errors: Error[]; secured: () => number; closed: () => number }> {
    const errors: Error[] = [];
    let secured = 0;
    let closed = 0;
    const secureContext = await leaves.secureContextFor(host);
    server = createServer((socket) => {
      sockets.add(socket);
      const tls = new ServerTlsSocket(socket, {
        isServer: true,
        secureContext,
        ALPNProtocols: [...INTERCEPT_ALPN_PROTOCOLS],
      });
      tls.on("error", (error) => errors.push(error));
      tls.on("close", () => {
        closed += 1;
      });
      tls.on("secure", () => {
        secured += 1;
        tls.end("hello");
      });
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("no port");
    return { port: address.port, errors, secured: () => secured, closed: () => closed };
  }

  function client(
    port: number,
    options: { servername: string; ca?: string; alpn?: string[] },
  ): Promise<{ socket: TLSSocket; body: string }> {
    return new Promise((resolve, reject) => {
      const socket = connect({
        host: "127.0.0.1",
        port,
        servername: options.servername,
        ...(options.ca === undefined ? {} : { ca: options.ca }),
        ALPNProtocols: options.alpn ?? ["http/1.1"],
      });
      let body = "";
      socket.on("data", (chunk: Buffer) => {
        body += chunk.toString();
      });
      socket.on("end", () => resolve({ socket, body }));
      socket.on("error", reject);
    });
  }

  it("a client trusting only the CA verifies the leaf and its host name, and gets http/1.1", async () => {
    const { port, errors } = await startTerminating("api.example.test");
    const { socket, body } = await client(port, {
      servername: "api.example.test",
      ca: written.certPem,
      alpn: ["h2", "http/1.1"],
    });
    expect(socket.authorized).toBe(true);
    expect(socket.alpnProtocol).toBe("http/1.1");
    expect(body).toBe("hello");
    expect(errors).toEqual([]);
  });

  it("the same client refuses it for another host name", async () => {
    const { port } = await startTerminating("api.example.test");
    await expect(
      client(port, { servername: "other.example.test", ca: written.certPem }),
    ).rejects.toMatchObject({ code: "ERR_TLS_CERT_ALTNAME_INVALID" });
  });

  it("a node client that does not trust the CA refuses it without an alert: the proxy sees only a close", async () => {
    const { port, errors, secured, closed } = await startTerminating("api.example.test");
    await expect(client(port, { servername: "api.example.test" })).rejects.toMatchObject({
      code: "SELF_SIGNED_CERT_IN_CHAIN",
    });
    // Node checks the chain itself once OpenSSL has it and destroys the socket without a TLS
    // alert: the server's handshake neither completes nor fails, the socket just closes. The
    // CONNECT handler must count a close before "secure" as a refusal ("closed").
    await waitFor(() => closed() === 1, "the server-side close");
    expect([secured(), errors]).toEqual([0, []]);
    expect(handshakeFailureReason(undefined)).toBe("closed");
  });

  it("curl refusing it sends an alert the proxy reads as untrusted_ca; with --cacert it is served", async () => {
    const { port, errors } = await startTerminating("api.example.test");
    const resolve = ["--resolve", `api.example.test:${port}:127.0.0.1`];
    const url = `https://api.example.test:${port}/`;
    const refused = await curl([...resolve, url]);
    expect(refused.code).toBe(60); // CURLE_PEER_FAILED_VERIFICATION
    await waitFor(() => errors.length > 0, "the server-side handshake error");
    expect(errors.map(handshakeFailureReason)).toEqual(["untrusted_ca"]);

    const caFile = written.caCertFile;
    const served = await curl([...resolve, "--cacert", caFile, "--http0.9", url]);
    expect(served).toMatchObject({ code: 0, stdout: "hello" });
  });

  it("an SNI callback mints only for the names it is allowed", async () => {
    const sni = leaves.sniCallback((host) => host === "api.example.test");
    const ask = (name: string) =>
      new Promise<unknown>((resolve) => sni(name, (error, context) => resolve(error ?? context)));
    expect(await ask("API.example.test")).toBe(await leaves.secureContextFor("api.example.test"));
    const refused = await ask("evil.example.test");
    expect(refused).toBeInstanceOf(Error);
    expect(String(refused)).toContain("not intercepted");
  });
});
