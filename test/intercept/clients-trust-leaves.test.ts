/**
 * Every tool docs/legacy-tools.md names accepts a leaf of a `--generate` CA with exactly the
 * setting the guide gives it, and refuses it without: curl, wget, Python (urllib under
 * VERIFY_X509_STRICT, Python 3.13's default, and requests), Node, git and Java. The server here
 * is plain HTTPS (what a terminated CONNECT presents), so only the certificate is under test.
 */
import { execFile } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadInterceptCa } from "../../src/config/intercept-ca.js";
import { createLeafCertificates } from "../../src/intercept/leaf-certificates.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import { keytoolImportArgs, TRUST_STORE_PASSWORD } from "./support/connect-client.js";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run a tool with PATH and `env` only (no proxy variables, no user config), never throwing. */
function run(file: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const files = useCaFiles("bp-clients-trust-");
const home = mkdtempSync(join(tmpdir(), "bp-clients-home-"));
let ca: CaFiles;
let server: Server;
let url = "";

const STRICT_URLLIB = `
import ssl, sys, urllib.request
ctx = ssl.create_default_context()
ctx.verify_flags |= ssl.VERIFY_X509_STRICT
print(urllib.request.urlopen(sys.argv[1], context=ctx).read().decode())
`;

const JAVA_GET = `
public class Get {
  public static void main(String[] args) throws Exception {
    var connection = (javax.net.ssl.HttpsURLConnection) new java.net.URL(args[0]).openConnection();
    System.out.print(new String(connection.getInputStream().readAllBytes()));
  }
}
`;

describe("each tool trusts a leaf with the setting the guide gives", () => {
  beforeAll(async () => {
    ca = await files.writeCa("ec-p256");
    const leaves = createLeafCertificates({ ca: await loadInterceptCa(ca) });
    const leaf = await leaves.leafFor("localhost");
    server = createServer({ cert: leaf.certPem, key: leaf.keyPem }, (_request, response) => {
      response.writeHead(404, { "content-type": "text/plain" }).end("leaf accepted");
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    url = `https://localhost:${(server.address() as { port: number }).port}/repo.git`;
  });
  afterAll(() => {
    server?.close();
    rmSync(home, { recursive: true, force: true });
  });

  it("curl --cacert", async () => {
    expect((await run("curl", ["-sS", url])).code).toBe(60);
    expect(await run("curl", ["-sS", "--cacert", ca.caCertFile, url])).toMatchObject({
      code: 0,
      stdout: "leaf accepted",
    });
  });

  it("wget --ca-certificate", async () => {
    const args = ["-qO-", "--content-on-error", url];
    expect((await run("wget", args)).code).toBe(5); // SSL verification failure
    const trusted = await run("wget", [`--ca-certificate=${ca.caCertFile}`, ...args]);
    expect(trusted.stdout).toBe("leaf accepted");
    expect(trusted.code).toBe(8); // the server's 404, after a verified handshake
  });

  it("Python urllib with SSL_CERT_FILE, verifying strictly", async () => {
    const refused = await run("python3", ["-c", STRICT_URLLIB, url]);
    expect(refused.stderr).toContain("CERTIFICATE_VERIFY_FAILED");
    const trusted = await run("python3", ["-c", STRICT_URLLIB, url], {
      SSL_CERT_FILE: ca.caCertFile,
    });
    // The 404 raises HTTPError: the handshake and verification went through.
    expect(trusted.stderr).toContain("HTTP Error 404");
    expect(trusted.stderr).not.toContain("CERTIFICATE_VERIFY_FAILED");
  });

  it("Python requests with REQUESTS_CA_BUNDLE", async () => {
    const script = "import requests, sys; print(requests.get(sys.argv[1]).text)";
    expect((await run("python3", ["-c", script, url])).stderr).toContain("SSLError");
    expect(
      await run("python3", ["-c", script, url], { REQUESTS_CA_BUNDLE: ca.caCertFile }),
    ).toMatchObject({ code: 0, stdout: "leaf accepted\n" });
  });

  it("Node with NODE_EXTRA_CA_CERTS", async () => {
    const script = "fetch(process.argv[1]).then(async (r) => console.log(await r.text()))";
    expect((await run(process.execPath, ["-e", script, url])).stderr).toContain("fetch failed");
    expect(
      await run(process.execPath, ["-e", script, url], { NODE_EXTRA_CA_CERTS: ca.caCertFile }),
    ).toMatchObject({ code: 0, stdout: "leaf accepted\n" });
  });

  it("git with http.sslCAInfo", async () => {
    // libcurl with OpenSSL says "SSL certificate problem", with GnuTLS "certificate verification failed".
    const refused = await run("git", ["ls-remote", url]);
    expect(refused.stderr).toMatch(/certificate (problem|verification failed)/);
    const trusted = await run("git", ["-c", `http.sslCAInfo=${ca.caCertFile}`, "ls-remote", url]);
    // Past TLS: git reports the missing repository (the server's 404).
    expect(trusted.stderr).not.toMatch(/certificate/);
    expect(trusted.stderr).toMatch(/not found|404/);
  });

  it("Java with a keytool trust store", async () => {
    const java = await run("java", ["-version"]);
    if (java.code !== 0) return; // no JDK on this machine: nothing to check
    const source = join(home, "Get.java");
    writeFileSync(source, JAVA_GET);
    const store = join(home, "truststore.p12");
    const imported = await run("keytool", keytoolImportArgs(ca.caCertFile, store));
    expect(imported.code).toBe(0);
    const refused = await run("java", [source, url]);
    expect(refused.stderr).toContain("PKIX path building failed");
    const trusted = await run("java", [
      `-Djavax.net.ssl.trustStore=${store}`,
      `-Djavax.net.ssl.trustStorePassword=${TRUST_STORE_PASSWORD}`,
      source,
      url,
    ]);
    // HttpsURLConnection throws FileNotFoundException on a 404: after a verified handshake.
    expect(trusted.stderr).not.toContain("PKIX");
    expect(trusted.stderr).toContain("FileNotFoundException");
  }, 120_000); // three JVM starts, one compiling the source
});
