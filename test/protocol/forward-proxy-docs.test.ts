import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki } from "../helpers/tls.js";
import { startTestProxy, type TestProxy } from "../proxy/harness.js";
import { createStubTokens } from "../proxy/stub-tokens.js";

const run = promisify(execFile);
const REPO_ROOT = join(import.meta.dirname, "..", "..");

/**
 * Issue 15 item 9: what the HTTP_PROXY docs promise, run for real. The legacy-tools guide's
 * undici ProxyAgent snippet works as printed (undici 7 tunnels unless `proxyTunnel: false`);
 * CONNECT's status line tells the user what to do; a local admin URL sent through the proxy is
 * refused with a hint to bypass it.
 */
describe("HTTP_PROXY mode as documented", () => {
  let upstream: FakeUpstream;
  let proxy: TestProxy;

  beforeAll(async () => {
    const pki = await createTestPki();
    upstream = await startFakeUpstream({
      cert: pki.good,
      handler: (req, res) => {
        const body = JSON.stringify({
          path: req.url,
          authorized: Boolean(req.headers.authorization),
        });
        res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
        res.end(body);
      },
    });
    proxy = await startTestProxy({
      caPem: pki.caPem,
      tokens: { sheets: createStubTokens() },
      logLevel: "warn",
      config: {
        upstreams: [
          { name: "sheets", baseUrl: upstream.origin, match: { hosts: ["sheets.internal"] } },
        ],
      },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await upstream.close();
  });

  it("the guide's undici ProxyAgent snippet runs as printed", async () => {
    const guide = readFileSync(join(REPO_ROOT, "docs", "legacy-tools.md"), "utf8");
    const snippet = [...guide.matchAll(/^```js\n([\s\S]*?)^```$/gm)]
      .map((m) => m[1]!)
      .find((code) => code.includes("ProxyAgent"));
    expect(snippet).toBeDefined();
    const code = snippet!.replaceAll("127.0.0.1:3128", `127.0.0.1:${proxy.port}`);
    const { stdout } = await run(process.execPath, ["--input-type=module", "-e", code], {
      cwd: REPO_ROOT,
      timeout: 20_000,
    });
    expect(stdout.trim()).toBe(`200 { path: '/platform/v1/spreadsheets/123', authorized: true }`);
  });

  it("CONNECT's status line says what to do (clients print only that line)", async () => {
    const { text } = await rawRequest(
      proxy.port,
      "CONNECT sheets.internal:443 HTTP/1.1\r\nHost: sheets.internal:443\r\n\r\n",
    );
    expect(text.split("\r\n")[0]).toBe(
      "HTTP/1.1 405 CONNECT refused - use http:// URLs, bearer-proxy forwards them over HTTPS",
    );
  });

  it("the admin URL sent through the proxy: 400 with a hint to bypass it for local addresses", async () => {
    for (const target of ["http://127.0.0.1:9901/status", "http://localhost:9901/status"]) {
      const { responses } = await rawRequest(
        proxy.port,
        `GET ${target} HTTP/1.1\r\nHost: ${new URL(target).host}\r\n\r\n`,
      );
      const body = JSON.parse(responses[0]!.body) as { error: { message: string } };
      expect(responses[0]!.status).toBe(target.includes("localhost") ? 403 : 400);
      expect(body.error.message).toContain("no_proxy=127.0.0.1,localhost");
    }
  });
});
