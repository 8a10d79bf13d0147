/**
 * Issue 34, done-when: the tools that only speak `https://` reach an intercepted upstream through
 * `HTTPS_PROXY` as they really do — curl, wget, Python (urllib and requests), Node (undici's
 * ProxyAgent, and the https module over a CONNECT socket with NODE_EXTRA_CA_CERTS), git (a real
 * clone from `git http-backend`) and Java — each trusting the interception CA with the setting
 * docs/legacy-tools.md gives it. The upstreams are real HTTPS servers: the emulator's scripting
 * preview (which answers /scripts only with its token and X-Version) and a git server. Each
 * request inside the tunnel arrives with the client's own Authorization replaced by the token,
 * X-Version injected, no Proxy-Authorization, and the access line says `via: connect`.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ProxyAgent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { accessLines, echoedHeader, echoedHeaderNames } from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { type CaFiles, useCaFiles } from "../helpers/intercept-ca-files.js";
import { createTestPki } from "../helpers/tls.js";
import { waitFor } from "../helpers/wait.js";
import {
  hasTool,
  interceptBlock,
  interceptedUpstream,
  keytoolImportArgs,
  runTool,
  TRUST_STORE_PASSWORD,
  toolEnv,
} from "./support/connect-client.js";
import { GIT_README, gitHttpBackend, makeBareRepository } from "./support/git-upstream.js";

const HAS = {
  curl: await hasTool("curl"),
  wget: await hasTool("wget"),
  python3: await hasTool("python3"),
  git: await hasTool("git"),
  java: await hasTool("java"),
};
const requestsInstalled =
  HAS.python3 && (await runTool("python3", ["-c", "import requests"], process.env)).code === 0;

/** A test name that says why it is skipped when `tool` is missing (CI installs no extra tools). */
const needs = (tool: keyof typeof HAS) =>
  HAS[tool] ? "" : ` [skipped: ${tool} is not on PATH; CI installs no extra tools]`;

/** What the client itself sends as Authorization: it must never reach the upstream. */
const CLIENT_AUTHORIZATION = "Bearer the-clients-own-token";

const files = useCaFiles("bp-connect-clients-");
let ca: CaFiles;
let emulator: Emulator;
let git: FakeUpstream;
let gateway: AppUnderTest;
let home: string;
/** `https://localhost:<port>`: the emulator's authority is what CONNECT names. */
let scriptsUrl: string;
let gitUrl: string;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), "bp-connect-clients-home-"));
  const pki = await createTestPki();
  ca = await files.writeCa("ec-p256");
  // "localhost" (the name on the emulator's certificate and on the leaf the client gets).
  emulator = await startTlsEmulator(pki, { host: "localhost" });
  git = await startFakeUpstream({
    cert: pki.good,
    handler: gitHttpBackend(makeBareRepository(join(home, "git"))),
    authorize: (authorization) => authorization?.startsWith("Bearer ") === true,
  });
  scriptsUrl = emulator.url;
  gitUrl = `https://localhost:${git.port}`;
  gateway = await startAppUnderTest({
    caPem: pki.caPem,
    config: {
      intercept: interceptBlock(ca),
      upstreams: [
        interceptedUpstream("scripts", scriptsUrl, { apiVersion: "scripting-preview" }),
        interceptedUpstream("git", gitUrl, { tokenUrl: `${emulator.url}/iam/v1/oauth2/token` }),
      ],
    },
  });
}, 30_000);

afterAll(async () => {
  await gateway?.close();
  await git?.close();
  await emulator?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

/**
 * What the upstream received (the emulator's /echo): the token in place of the client's own
 * Authorization, the preview's X-Version, and nothing of the proxy hop.
 */
function expectInjected(echoJson: string): void {
  const authorization = echoedHeader(echoJson, "authorization");
  expect(authorization).toMatch(/^Bearer \S+$/);
  expect(authorization).not.toBe(CLIENT_AUTHORIZATION);
  expect(echoedHeader(echoJson, "x-version")).toBe(SCRIPTING_PREVIEW_HEADER);
  const names = echoedHeaderNames(echoJson);
  expect(names.filter((name) => name === "authorization")).toHaveLength(1);
  expect(names).not.toContain("proxy-authorization");
  expect(echoedHeader(echoJson, "x-forwarded-proto") ?? "https").toBe("https");
}

/** The newest access line for `path`: the scripts upstream, through CONNECT. */
async function expectAccessLine(path: string, extra: Record<string, unknown> = {}): Promise<void> {
  await waitFor(
    () => accessLines(gateway.records).some((line) => line.path === path),
    `the access line of ${path}`,
  );
  const line = accessLines(gateway.records).findLast((l) => l.path === path);
  expect(line).toMatchObject({ upstream: "scripts", status: 200, via: "connect", ...extra });
}

describe("tools that only speak https:// reach an intercepted upstream through HTTPS_PROXY", () => {
  it.skipIf(!HAS.curl)(`curl with https_proxy and --cacert${needs("curl")}`, async () => {
    const env = toolEnv(home, { https_proxy: gateway.url });
    const got = await runTool(
      "curl",
      [
        "-sS",
        "--fail-with-body",
        "--cacert",
        ca.caCertFile,
        "-H",
        `Authorization: ${CLIENT_AUTHORIZATION}`,
        `${scriptsUrl}/echo/curl`,
        // A second URL on the same tunnel: curl keeps the intercepted connection alive.
        `${scriptsUrl}/scripts`,
      ],
      env,
    );
    expect(got.stderr).toBe("");
    expect(got.code).toBe(0);
    const [echoJson, scripts] = splitJsonDocuments(got.stdout);
    expectInjected(echoJson!);
    // The preview route answers only with the preview's token and X-Version.
    expect(JSON.parse(scripts!)).toMatchObject({
      scripts: [{ id: "script-1" }, { id: "script-2" }],
    });
    await expectAccessLine("/echo/curl");
    await expectAccessLine("/scripts");
  });

  it.skipIf(!HAS.wget)(`wget with https_proxy and --ca-certificate${needs("wget")}`, async () => {
    const got = await runTool(
      "wget",
      [
        "-qO-",
        `--ca-certificate=${ca.caCertFile}`,
        `--header=Authorization: ${CLIENT_AUTHORIZATION}`,
        `${scriptsUrl}/echo/wget`,
      ],
      toolEnv(home, { https_proxy: gateway.url }),
    );
    expect(got.code).toBe(0);
    expectInjected(got.stdout);
    await expectAccessLine("/echo/wget");
  });

  it.skipIf(!HAS.python3)(
    `Python urllib with HTTPS_PROXY and SSL_CERT_FILE, verifying strictly${needs("python3")}`,
    async () => {
      const script = [
        "import ssl, sys, urllib.request",
        "ctx = ssl.create_default_context()",
        // Python 3.13's default: the leaf must carry what RFC 5280 asks of it.
        "ctx.verify_flags |= ssl.VERIFY_X509_STRICT",
        "opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))",
        "req = urllib.request.Request(sys.argv[1], headers={'Authorization': sys.argv[2]})",
        "print(opener.open(req, timeout=20).read().decode())",
      ].join("\n");
      const got = await runTool(
        "python3",
        ["-c", script, `${scriptsUrl}/echo/urllib`, CLIENT_AUTHORIZATION],
        toolEnv(home, { HTTPS_PROXY: gateway.url, SSL_CERT_FILE: ca.caCertFile }),
      );
      expect(got.stderr).toBe("");
      expectInjected(got.stdout);
      await expectAccessLine("/echo/urllib");
    },
  );

  it.skipIf(!requestsInstalled)(
    `Python requests with HTTPS_PROXY and REQUESTS_CA_BUNDLE${requestsInstalled ? "" : " [skipped: python3 with requests is not installed]"}`,
    async () => {
      const script = [
        "import sys, requests",
        "with requests.Session() as s:",
        "    for path in ('/echo/requests', '/scripts'):",
        "        r = s.get(sys.argv[1] + path, headers={'Authorization': sys.argv[2]}, timeout=20)",
        "        r.raise_for_status()",
        "        print(r.text)",
      ].join("\n");
      const got = await runTool(
        "python3",
        ["-c", script, scriptsUrl, CLIENT_AUTHORIZATION],
        toolEnv(home, { HTTPS_PROXY: gateway.url, REQUESTS_CA_BUNDLE: ca.caCertFile }),
      );
      expect(got.stderr).toBe("");
      const [echoJson, scripts] = got.stdout.trim().split("\n");
      expectInjected(echoJson!);
      expect(JSON.parse(scripts!)).toMatchObject({
        scripts: [{ id: "script-1" }, { id: "script-2" }],
      });
      await expectAccessLine("/echo/requests");
    },
  );

  it("Node: undici's ProxyAgent tunnels https:// with CONNECT and keeps the tunnel alive", async () => {
    // One connection per origin: a request sent the moment the last one ended would otherwise
    // find the connection not yet marked free (undici's pool) and open a second tunnel.
    const dispatcher = new ProxyAgent({
      uri: gateway.url,
      connections: 1,
      requestTls: { ca: ca.certPem },
    });
    const proxyServer = gateway.app.proxies[0]!.server;
    let connects = 0;
    const countConnect = () => connects++;
    proxyServer.on("connect", countConnect);
    try {
      for (const path of ["/echo/undici-1", "/echo/undici-2"]) {
        const response = await request(`${scriptsUrl}${path}`, {
          dispatcher,
          headers: { authorization: CLIENT_AUTHORIZATION },
        });
        const text = await response.body.text();
        expect(response.statusCode, text).toBe(200);
        expectInjected(text);
        await expectAccessLine(path);
      }
      // Both requests went through one CONNECT: the decrypted connection stayed alive.
      expect(connects).toBe(1);
    } finally {
      proxyServer.off("connect", countConnect);
      await dispatcher.close();
    }
  });

  it("Node: the https module over a CONNECT socket, trusting the CA with NODE_EXTRA_CA_CERTS", async () => {
    // What an SDK with its own CONNECT agent does: tunnel, then TLS with Node's default trust
    // (the built-in roots plus NODE_EXTRA_CA_CERTS, read at process start).
    const script = `
      const http = require("node:http"), https = require("node:https"), tls = require("node:tls");
      const [proxy, target, authorization] = process.argv.slice(1);
      const { hostname, port } = new URL(target);
      http.request(proxy, { method: "CONNECT", path: hostname + ":" + port })
        .on("connect", (res, socket) => {
          if (res.statusCode !== 200) { console.error("CONNECT", res.statusCode); process.exit(1); }
          https.get(target, {
            headers: { authorization },
            createConnection: () => tls.connect({ socket, servername: hostname }),
          }, (answer) => {
            let body = "";
            answer.setEncoding("utf8").on("data", (c) => body += c).on("end", () => {
              console.log(body);
              socket.destroy();
            });
          }).on("error", (e) => { console.error(e.code || e.message); process.exit(1); });
        })
        .end();`;
    const args = ["-e", script, gateway.url, `${scriptsUrl}/echo/node-https`, CLIENT_AUTHORIZATION];
    const refused = await runTool(process.execPath, args, toolEnv(home));
    // The leaf comes with the CA certificate (self-signed), which Node's roots do not hold.
    expect(refused.stderr).toContain("SELF_SIGNED_CERT_IN_CHAIN");
    const got = await runTool(
      process.execPath,
      args,
      toolEnv(home, { NODE_EXTRA_CA_CERTS: ca.caCertFile }),
    );
    expect(got.stderr).toBe("");
    expectInjected(got.stdout);
    await expectAccessLine("/echo/node-https");
  });

  it.skipIf(!HAS.git)(
    `git clone through https_proxy with http.sslCAInfo (smart HTTP from git http-backend)${needs("git")}`,
    async () => {
      const before = git.requests.length;
      const target = join(home, "clone");
      const got = await runTool(
        "git",
        ["-c", `http.sslCAInfo=${ca.caCertFile}`, "clone", "-q", `${gitUrl}/repo.git`, target],
        toolEnv(home, { https_proxy: gateway.url }),
        60_000,
      );
      expect(got.stderr).toBe("");
      expect(got.code).toBe(0);
      expect(readFileSync(join(target, "README.md"), "utf8")).toBe(GIT_README);
      // Discovery and the pack both reached the git server with the injected token.
      const seen = git.requests.slice(before);
      expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual(
        expect.arrayContaining([
          "GET /repo.git/info/refs?service=git-upload-pack",
          "POST /repo.git/git-upload-pack",
        ]),
      );
      for (const received of seen) {
        const authorization = received.headers.filter(([n]) => n.toLowerCase() === "authorization");
        expect(authorization).toHaveLength(1);
        expect(authorization[0]![1]).toMatch(/^Bearer \S+$/);
      }
      const lines = accessLines(gateway.records).filter((l) => l.upstream === "git");
      expect(lines.map((l) => [l.path, l.status, l.via])).toEqual(
        expect.arrayContaining([
          ["/repo.git/info/refs", 200, "connect"],
          ["/repo.git/git-upload-pack", 200, "connect"],
        ]),
      );
    },
    90_000,
  );

  it.skipIf(!HAS.java)(
    `Java: https.proxyHost/Port and a keytool trust store${needs("java")}`,
    async () => {
      const store = join(home, "truststore.p12");
      const imported = await runTool(
        "keytool",
        keytoolImportArgs(ca.caCertFile, store),
        toolEnv(home),
      );
      expect(imported.code).toBe(0);
      const source = join(home, "Get.java");
      writeFileSync(source, JAVA_GET);
      const proxy = new URL(gateway.url);
      const got = await runTool(
        "java",
        [
          `-Dhttps.proxyHost=${proxy.hostname}`,
          `-Dhttps.proxyPort=${proxy.port}`,
          // Java goes direct to localhost|127.*|[::1] unless told otherwise (the target here).
          "-Dhttp.nonProxyHosts=",
          `-Djavax.net.ssl.trustStore=${store}`,
          `-Djavax.net.ssl.trustStorePassword=${TRUST_STORE_PASSWORD}`,
          source,
          `${scriptsUrl}/echo/java`,
          CLIENT_AUTHORIZATION,
        ],
        toolEnv(home),
        90_000,
      );
      expect(got.code, got.stderr).toBe(0);
      expectInjected(got.stdout);
      await expectAccessLine("/echo/java");
    },
    120_000,
  );

  it("a plain http:// request to the same upstream still routes by match.hosts (not via connect)", async () => {
    // The intercepted upstream keeps its place in the listener's plain routing.
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpRequest(
        `${gateway.url}/echo/plain`,
        { headers: { host: "scripts.internal" }, agent: false },
        (res) => {
          let text = "";
          res.setEncoding("utf8").on("data", (chunk: string) => {
            text += chunk;
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on("error", reject).end();
    });
    expect(answer.status).toBe(200);
    expect(echoedHeader(answer.text, "x-forwarded-proto") ?? "http").toBe("http");
    const line = accessLines(gateway.records).findLast((l) => l.path === "/echo/plain");
    expect(line).toMatchObject({ upstream: "scripts", status: 200 });
    expect(line).not.toHaveProperty("via");
  });
});

const JAVA_GET = `
public class Get {
  public static void main(String[] args) throws Exception {
    var connection = (javax.net.ssl.HttpsURLConnection) new java.net.URL(args[0]).openConnection();
    connection.setRequestProperty("Authorization", args[1]);
    System.out.print(new String(connection.getInputStream().readAllBytes()));
  }
}
`;

/** Back-to-back JSON documents as curl prints them for several URLs. */
function splitJsonDocuments(text: string): string[] {
  const documents: string[] = [];
  let depth = 0;
  let start = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") {
      if (depth++ === 0) start = i;
    } else if (c === "}" && --depth === 0) documents.push(text.slice(start, i + 1));
  }
  return documents;
}
