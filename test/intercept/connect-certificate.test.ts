/**
 * Issue 34: the certificate a terminated CONNECT presents, read as a client reads it — over a
 * real CONNECT socket with node's tls, and with `openssl s_client -proxy`. It names the
 * CONNECT's host (SAN DNS:host, or IP:address for an IP literal), is issued by the interception
 * CA, verifies against that CA alone, lives a day (from an hour back), comes with the CA's
 * certificate, offers http/1.1 over ALPN, and is chosen by the CONNECT's authority, not by
 * what the client's SNI says. Nothing here contacts an upstream: the handshake is the proxy's.
 */
import { X509Certificate } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import {
  hasTool,
  interceptBlock,
  interceptedUpstream,
  runTool,
  sendConnect,
  tlsThrough,
  toolEnv,
} from "./support/connect-client.js";

const HAS_OPENSSL = await hasTool("openssl");
const HOUR_MS = 60 * 60 * 1000;

const files = useCaFiles("bp-connect-certificate-");
let ca: CaFiles;
let caCertificate: X509Certificate;
let gateway: AppUnderTest;

beforeAll(async () => {
  ca = await files.writeCa("ec-p256");
  caCertificate = new X509Certificate(ca.certPem);
  gateway = await startAppUnderTest({
    config: {
      intercept: interceptBlock(ca),
      upstreams: [
        interceptedUpstream("api", "https://api.example.test", { token: { prefetch: false } }),
        interceptedUpstream("addr", "https://127.0.0.1:9", { token: { prefetch: false } }),
      ],
    },
  });
});
afterAll(async () => {
  await gateway?.close();
});

/** CONNECT, then TLS trusting the interception CA alone; the leaf and the negotiated protocol. */
async function leafThrough(
  authority: string,
  host: string,
  options: { ALPNProtocols?: string[] } = {},
) {
  const answer = await sendConnect(gateway.url, authority);
  expect(answer.head).toBe("HTTP/1.1 200 Connection established");
  expect(answer.extra).toHaveLength(0);
  const tls = await tlsThrough(answer.socket, { host, ca: ca.certPem, ...options });
  const leaf = tls.getPeerX509Certificate()!;
  const result = {
    leaf,
    alpn: tls.alpnProtocol,
    authorized: tls.authorized,
  };
  tls.destroy();
  return result;
}

describe("the certificate a terminated CONNECT presents", () => {
  it("names the host (SAN DNS:host), is issued by the CA, lives a day from an hour back", async () => {
    const startMs = Date.now();
    const got = await leafThrough("api.example.test:443", "api.example.test", {
      ALPNProtocols: ["h2", "http/1.1"],
    });
    expect(got.authorized).toBe(true);
    expect(got.leaf.subjectAltName).toBe("DNS:api.example.test");
    expect(got.leaf.subject).toBe("CN=api.example.test");
    expect(got.leaf.issuer).toBe(caCertificate.subject);
    expect(got.leaf.checkIssued(caCertificate)).toBe(true);
    expect(got.leaf.verify(caCertificate.publicKey)).toBe(true);
    expect(got.leaf.ca).toBe(false);
    expect(got.leaf.checkHost("api.example.test")).toBe("api.example.test");
    expect(got.leaf.checkHost("other.example.test")).toBeUndefined();
    // Short-lived: 25 h in all, an hour of it before now (clients whose clocks lag).
    const notBefore = Date.parse(got.leaf.validFrom);
    const notAfter = Date.parse(got.leaf.validTo);
    expect(notAfter - notBefore).toBe(25 * HOUR_MS);
    expect(notBefore).toBeLessThanOrEqual(startMs - HOUR_MS + 1000);
    expect(notAfter).toBeGreaterThan(startMs + 12 * HOUR_MS);
    expect(notAfter).toBeLessThanOrEqual(Date.now() + 24 * HOUR_MS);
    // The pipeline speaks HTTP/1.1: a client offering h2 too gets http/1.1.
    expect(got.alpn).toBe("http/1.1");
  });

  it("is chosen by the CONNECT's authority: any case, and whatever SNI the client sends", async () => {
    const upper = await leafThrough("API.Example.TEST:443", "api.example.test");
    expect(upper.leaf.subjectAltName).toBe("DNS:api.example.test");
    // A client that sends another name (or none) still gets the CONNECT host's leaf: what it
    // then accepts is its own verification's business (node refuses the mismatch).
    const answer = await sendConnect(gateway.url, "api.example.test:443");
    const mismatch = await tlsThrough(answer.socket, {
      host: "elsewhere.example.test",
      ca: ca.certPem,
    }).catch((error: NodeJS.ErrnoException) => error);
    expect(mismatch).toMatchObject({ code: "ERR_TLS_CERT_ALTNAME_INVALID" });
  });

  it("names an IP literal as an IP SAN, with no SNI sent", async () => {
    const got = await leafThrough("127.0.0.1:9", "127.0.0.1");
    expect(got.authorized).toBe(true);
    expect(got.leaf.subjectAltName).toBe("IP Address:127.0.0.1");
    expect(got.leaf.checkIP("127.0.0.1")).toBe("127.0.0.1");
  });

  it.skipIf(!HAS_OPENSSL)(
    "openssl s_client -proxy verifies it against the CA and shows the chain",
    async () => {
      const proxy = new URL(gateway.url);
      const connect = [
        "s_client",
        "-proxy",
        proxy.host,
        "-connect",
        "api.example.test:443",
        "-servername",
        "api.example.test",
        "-alpn",
        "http/1.1",
        "-verify_return_error",
        "-showcerts",
      ];
      const trusted = await runTool(
        "openssl",
        [...connect, "-CAfile", ca.caCertFile],
        toolEnv("/"),
      );
      expect(trusted.stdout).toContain("Verify return code: 0 (ok)");
      expect(trusted.stdout).toContain("ALPN protocol: http/1.1");
      // The leaf, then the CA's certificate (a client holding only the CA builds the chain).
      expect(trusted.stdout).toMatch(
        /0 s:CN ?= ?api\.example\.test\n\s+i:CN ?= ?test interception CA/,
      );
      expect(trusted.stdout).toMatch(/1 s:CN ?= ?test interception CA \(ec-p256\)\n/);
      const served = new X509Certificate(
        trusted.stdout.slice(trusted.stdout.indexOf("-----BEGIN")),
      );
      expect(served.subjectAltName).toBe("DNS:api.example.test");
      expect(served.checkIssued(caCertificate)).toBe(true);
      // Trusting another CA only, verification fails on the self-signed CA in the chain.
      const other = await files.writeCa("ec-p256");
      const refused = await runTool(
        "openssl",
        [...connect, "-CAfile", other.caCertFile, "-no-CApath"],
        toolEnv("/"),
      );
      expect(refused.code).not.toBe(0);
      expect(refused.stdout + refused.stderr).toMatch(
        /self[- ]signed certificate in certificate chain/,
      );
    },
  );
});
