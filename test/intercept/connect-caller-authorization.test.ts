/**
 * Issue 34: caller authorization applies to the CONNECT itself. Where the intercepted upstream's
 * `allow` names users (callers.basic), a CONNECT without credentials gets 407 with
 * `Proxy-Authenticate: Basic realm="bearer-proxy"` before any TLS, a listed user's tunnel is
 * terminated and every request inside is that user's (`caller: user:alice`, `via: connect`), an
 * unlisted user gets 403. Real tools put the credential in the proxy URL (`https_proxy=
 * http://alice:pw@…`): curl and Python send it on the CONNECT, git after the 407, undici from
 * the ProxyAgent's URI. The upstream never sees Proxy-Authorization; no password is logged.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ProxyAgent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import {
  accessLines,
  adminPages,
  basicHeader,
  basicValue,
  echoedHeader,
  echoedHeaderNames,
  expectNoSecrets,
  htpasswdFile,
} from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import {
  hasTool,
  interceptBlock,
  interceptedUpstream,
  keytoolImportArgs,
  requestOver,
  runTool,
  sendConnect,
  TRUST_STORE_PASSWORD,
  tlsThrough,
  toolEnv,
} from "./support/connect-client.js";

const HAS_CURL = await hasTool("curl");
const HAS_PYTHON = await hasTool("python3");
const HAS_GIT = await hasTool("git");
const HAS_WGET = await hasTool("wget");
const HAS_JAVA = await hasTool("java");

const ALICE = { user: "alice", password: "alice-pw:with@colon" };
const BOB = { user: "bob", password: "bob-Pw7" };

const files = useCaFiles("bp-connect-callers-");
let ca: CaFiles;
let emulator: Emulator;
let gateway: AppUnderTest;
let home: string;
let authority: string;
/** Every client's output: must hold no credential either. */
const outputs: string[] = [];
/** 407 as a status, not as digits of a port (git prints the URL, 127.0.0.1:40701 included). */
const STATUS_407 = /(?<!\d)407(?!\d)/;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "bp-connect-callers-home-"));
  const pki = await createTestPki();
  ca = await files.writeCa("ec-p256");
  emulator = await startTlsEmulator(pki, { host: "localhost" });
  authority = new URL(emulator.url).host;
  gateway = await startAppUnderTest({
    caPem: pki.caPem,
    files: {
      "callers.htpasswd": htpasswdFile({
        [ALICE.user]: ALICE.password,
        [BOB.user]: BOB.password,
      }),
    },
    config: {
      callers: { basic: { usersFile: "callers.htpasswd" } },
      intercept: interceptBlock(ca),
      upstreams: [interceptedUpstream("api", emulator.url, { allow: [{ user: ALICE.user }] })],
    },
  });
}, 30_000);
afterAll(async () => {
  await gateway?.close();
  await emulator?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

const proxyUrl = (who: { user: string; password: string }) =>
  `http://${encodeURIComponent(who.user)}:${encodeURIComponent(who.password)}@${new URL(gateway.url).host}`;

/** The upstream's view: the token, no Proxy-Authorization. */
function expectUpstreamSawToken(echoJson: string): void {
  expect(echoedHeader(echoJson, "authorization")).toMatch(/^Bearer /);
  expect(echoedHeaderNames(echoJson)).not.toContain("proxy-authorization");
}

async function lineFor(path: string) {
  await waitFor(() => accessLines(gateway.records).some((l) => l.path === path), path);
  return accessLines(gateway.records).findLast((l) => l.path === path)!;
}

describe("caller authorization on CONNECT", () => {
  it("answers a CONNECT without credentials 407 with the Basic challenge, before any TLS", async () => {
    const answer = await sendConnect(gateway.url, authority);
    expect(answer.status).toBe(407);
    const response = answer.response!;
    expect(response.headers.get("proxy-authenticate")).toEqual(['Basic realm="bearer-proxy"']);
    expect(response.headers.get("bearer-proxy-error")).toEqual(["caller_unauthenticated"]);
    expect(response.headers.get("connection")).toEqual(["close"]);
    expect(JSON.parse(response.body)).toMatchObject({ error: { code: "caller_unauthenticated" } });
    // An HTTP answer and the end of the connection: no TLS record ever followed.
    expect(answer.socket.readableEnded || answer.socket.destroyed).toBe(true);
    const line = await lineFor(authority);
    expect(line).toMatchObject({
      method: "CONNECT",
      status: 407,
      upstream: "api",
      errorCode: "caller_unauthenticated",
      via: "connect",
    });
  });

  it("answers 407 to a wrong password and 403 to a user the list does not name", async () => {
    const wrong = await sendConnect(gateway.url, authority, {
      "proxy-authorization": basicHeader(ALICE.user, "not-her-password"),
    });
    expect(wrong.status).toBe(407);
    const unlisted = await sendConnect(gateway.url, authority, {
      "proxy-authorization": basicHeader(BOB.user, BOB.password),
    });
    expect(unlisted.status).toBe(403);
    expect(unlisted.response!.headers.get("bearer-proxy-error")).toEqual(["caller_not_allowed"]);
    const lines = accessLines(gateway.records).filter((l) => l.method === "CONNECT");
    expect(lines.at(-1)).toMatchObject({ status: 403, caller: "user:bob", via: "connect" });
  });

  it("makes the CONNECT's caller the caller of every request inside, whatever they carry", async () => {
    const answer = await sendConnect(gateway.url, authority, {
      "proxy-authorization": basicHeader(ALICE.user, ALICE.password),
    });
    expect(answer.status).toBe(200);
    const tls = await tlsThrough(answer.socket, { host: "localhost", ca: ca.certPem });
    try {
      const plain = await requestOver(tls, authority, "/echo/inside-1");
      expect(plain.status).toBe(200);
      expectUpstreamSawToken(plain.text);
      // Inside the tunnel a Proxy-Authorization means nothing: not bob, and not forwarded.
      const other = await requestOver(tls, authority, "/echo/inside-2", {
        headers: { "proxy-authorization": basicHeader(BOB.user, BOB.password) },
      });
      expect(other.status).toBe(200);
      expectUpstreamSawToken(other.text);
    } finally {
      tls.destroy();
    }
    for (const path of ["/echo/inside-1", "/echo/inside-2"]) {
      expect(await lineFor(path)).toMatchObject({
        upstream: "api",
        status: 200,
        caller: "user:alice",
        via: "connect",
      });
    }
  });

  it.skipIf(!HAS_CURL)(
    "curl: without credentials 407, with https_proxy=http://alice:pw@… 200",
    async () => {
      const url = `${emulator.url}/echo/curl-alice`;
      const bare = await runTool(
        "curl",
        ["-sS", "--cacert", ca.caCertFile, url],
        toolEnv(home, { https_proxy: gateway.url }),
      );
      expect(bare.code).toBe(56);
      expect(bare.stderr).toContain("CONNECT tunnel failed, response 407");
      const got = await runTool(
        "curl",
        ["-sS", "--cacert", ca.caCertFile, url],
        toolEnv(home, { https_proxy: proxyUrl(ALICE) }),
      );
      outputs.push(got.stdout, got.stderr);
      expect(got.code).toBe(0);
      expectUpstreamSawToken(got.stdout);
      expect(await lineFor("/echo/curl-alice")).toMatchObject({
        status: 200,
        caller: "user:alice",
        via: "connect",
      });
    },
  );

  it.skipIf(!HAS_PYTHON)(
    "Python urllib with HTTPS_PROXY=http://alice:pw@… (a password with ':' and '@')",
    async () => {
      const script = [
        "import sys, urllib.request",
        "print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())",
      ].join("\n");
      const got = await runTool(
        "python3",
        ["-c", script, `${emulator.url}/echo/python-alice`],
        toolEnv(home, { HTTPS_PROXY: proxyUrl(ALICE), SSL_CERT_FILE: ca.caCertFile }),
      );
      outputs.push(got.stdout, got.stderr);
      expect(got.stderr).toBe("");
      expectUpstreamSawToken(got.stdout);
      expect(await lineFor("/echo/python-alice")).toMatchObject({
        caller: "user:alice",
        via: "connect",
      });
    },
  );

  it.skipIf(!HAS_WGET)("wget with https_proxy=http://alice:pw@…", async () => {
    const got = await runTool(
      "wget",
      ["-qO-", `--ca-certificate=${ca.caCertFile}`, `${emulator.url}/echo/wget-alice`],
      toolEnv(home, { https_proxy: proxyUrl(ALICE) }),
    );
    outputs.push(got.stdout, got.stderr);
    expect(got.code).toBe(0);
    expectUpstreamSawToken(got.stdout);
    expect(await lineFor("/echo/wget-alice")).toMatchObject({
      caller: "user:alice",
      via: "connect",
    });
  });

  it.skipIf(!HAS_GIT)(
    "git: a bare CONNECT first (407), then Basic on the next; the requests inside are alice's",
    async () => {
      const before = accessLines(gateway.records).length;
      // The emulator speaks no git: it answers 404 after the tunnel and the gate let git through.
      const got = await runTool(
        "git",
        ["-c", `http.sslCAInfo=${ca.caCertFile}`, "ls-remote", `${emulator.url}/repo.git`],
        toolEnv(home, { https_proxy: proxyUrl(ALICE) }),
      );
      outputs.push(got.stdout, got.stderr);
      expect(got.code).not.toBe(0);
      // A bare "407" would match a port such as 40701 in the URL git prints.
      expect(got.stderr).not.toMatch(STATUS_407);
      const infoRefs = await lineFor("/repo.git/info/refs");
      expect(infoRefs).toMatchObject({ caller: "user:alice", via: "connect", status: 404 });
      const connects = accessLines(gateway.records)
        .slice(before)
        .filter((l) => l.method === "CONNECT");
      // libcurl (CURLAUTH_ANY, as git sets it) asks once without a credential, then answers the
      // challenge on a new connection (the 407 closed the first); a 200 is never logged.
      expect(connects).toHaveLength(1);
      expect(connects[0]).toMatchObject({ status: 407, errorCode: "caller_unauthenticated" });
    },
  );

  it.skipIf(!HAS_JAVA)(
    "Java: an Authenticator, and Basic allowed for tunnels (jdk.http.auth.tunneling.disabledSchemes)",
    async () => {
      const store = join(home, "truststore.p12");
      const imported = await runTool(
        "keytool",
        keytoolImportArgs(ca.caCertFile, store),
        toolEnv(home),
      );
      expect(imported.code).toBe(0);
      const source = join(home, "ProxyGet.java");
      writeFileSync(source, JAVA_PROXY_GET);
      const proxy = new URL(gateway.url);
      const java = (extra: string[]) =>
        runTool(
          "java",
          [
            `-Dhttps.proxyHost=${proxy.hostname}`,
            `-Dhttps.proxyPort=${proxy.port}`,
            "-Dhttp.nonProxyHosts=",
            `-Djavax.net.ssl.trustStore=${store}`,
            `-Djavax.net.ssl.trustStorePassword=${TRUST_STORE_PASSWORD}`,
            ...extra,
            source,
            `${emulator.url}/echo/java-alice`,
            ALICE.user,
            ALICE.password,
          ],
          toolEnv(home),
          90_000,
        );
      // The JDK refuses Basic for CONNECT unless told otherwise: the 407 stands.
      const refused = await java([]);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toMatch(STATUS_407);
      const got = await java(["-Djdk.http.auth.tunneling.disabledSchemes="]);
      outputs.push(got.stdout);
      expect(got.code, got.stderr).toBe(0);
      expectUpstreamSawToken(got.stdout);
      expect(await lineFor("/echo/java-alice")).toMatchObject({
        caller: "user:alice",
        via: "connect",
      });
    },
    120_000,
  );

  it("undici's ProxyAgent sends the credential of its URI on the CONNECT", async () => {
    const dispatcher = new ProxyAgent({ uri: proxyUrl(ALICE), requestTls: { ca: ca.certPem } });
    try {
      const response = await request(`${emulator.url}/echo/undici-alice`, { dispatcher });
      const text = await response.body.text();
      expect(response.statusCode, text).toBe(200);
      expectUpstreamSawToken(text);
    } finally {
      await dispatcher.close();
    }
    expect(await lineFor("/echo/undici-alice")).toMatchObject({
      caller: "user:alice",
      via: "connect",
    });
  });

  it("no password or Basic value in any log line, client output, /status or /metrics", async () => {
    const secrets = [ALICE, BOB].flatMap((who) => [
      who.password,
      encodeURIComponent(who.password),
      basicValue(who.user, who.password),
    ]);
    expectNoSecrets(
      { logs: gateway.lines, outputs, ...(await adminPages(gateway.adminUrl)) },
      secrets,
    );
  });
});

/** A GET through https.proxyHost whose Authenticator answers the proxy's challenge. */
const JAVA_PROXY_GET = `
public class ProxyGet {
  public static void main(String[] args) throws Exception {
    java.net.Authenticator.setDefault(new java.net.Authenticator() {
      protected java.net.PasswordAuthentication getPasswordAuthentication() {
        if (getRequestorType() != RequestorType.PROXY) return null;
        return new java.net.PasswordAuthentication(args[1], args[2].toCharArray());
      }
    });
    var connection = (javax.net.ssl.HttpsURLConnection) new java.net.URL(args[0]).openConnection();
    System.out.print(new String(connection.getInputStream().readAllBytes()));
  }
}
`;
