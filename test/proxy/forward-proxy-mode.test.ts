import { execFile } from "node:child_process";
import { createServer, type Server } from "node:net";
import { promisify } from "node:util";
import { ProxyAgent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EchoResponse } from "../../src/emulator/index.js";
import { useEmulator } from "../helpers/emulator.js";
import { rawRequest } from "../helpers/raw-http.js";
import { startTestProxy, type TestProxy } from "./harness.js";

const run = promisify(execFile);

/**
 * HTTP_PROXY mode (issue 6): legacy tools send absolute-form requests for http:// URLs; a host in
 * `match.hosts` is forwarded over HTTPS with the token, anything else is refused before any
 * connection is made. Real clients: curl, Python urllib, undici ProxyAgent.
 */
describe("forward-proxy (absolute-form) mode", () => {
  const emulator = useEmulator();
  let proxy: TestProxy;
  /** A listener that must never see a connection: the "somewhere else" of an open proxy. */
  let canary: Server;
  let canaryPort = 0;
  let canaryConnections = 0;

  beforeAll(async () => {
    proxy = await startTestProxy({
      caPem: emulator().caPem,
      tokens: "real",
      config: {
        upstreams: [
          {
            name: "api",
            baseUrl: emulator().url,
            match: { hosts: ["api.example.test"] },
          },
          {
            name: "preview",
            baseUrl: emulator().url,
            apiVersion: "scripting-preview",
            match: { hosts: ["scripts.example.test:8080"] },
          },
        ],
      },
    });
    canary = createServer((socket) => {
      canaryConnections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => canary.listen(0, "127.0.0.1", resolve));
    canaryPort = (canary.address() as { port: number }).port;
  });
  afterAll(async () => {
    await proxy.close();
    await new Promise<void>((resolve) => canary.close(() => resolve()));
  });

  const childEnv = () => ({
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "/tmp",
    PYENV_ROOT: process.env.PYENV_ROOT ?? "",
  });

  it("curl -x: the tool's http:// URL reaches the upstream over HTTPS with a token", async () => {
    const { stdout } = await run(
      "curl",
      ["-sS", "-x", proxy.url, "http://api.example.test/echo/curl?q=1"],
      {
        env: childEnv(),
      },
    );
    const echo = JSON.parse(stdout) as EchoResponse;
    expect(echo.url).toBe("/echo/curl?q=1");
    const headers = new Map(echo.headers.map(([n, v]) => [n.toLowerCase(), v]));
    expect(headers.get("host")).toBe(new URL(emulator().url).host);
    expect(headers.get("authorization")).toMatch(/^Bearer \S+$/);
    expect(headers.has("proxy-connection")).toBe(false);
  });

  it("curl with http_proxy in its environment, preview version with a port in match.hosts", async () => {
    const { stdout } = await run("curl", ["-sS", "http://scripts.example.test:8080/scripts"], {
      env: { ...childEnv(), http_proxy: proxy.url },
    });
    expect(JSON.parse(stdout).scripts).toHaveLength(2);
  });

  it("Python urllib with HTTP_PROXY", async () => {
    const script =
      "import urllib.request,json;" +
      "r=urllib.request.urlopen('http://api.example.test/echo/python');" +
      "print(json.loads(r.read())['url'])";
    const { stdout } = await run("python3", ["-c", script], {
      env: { ...childEnv(), HTTP_PROXY: proxy.url, http_proxy: proxy.url },
    });
    expect(stdout.trim()).toBe("/echo/python");
  });

  it("undici ProxyAgent (without tunnelling, as for http:// URLs)", async () => {
    const agent = new ProxyAgent({ uri: proxy.url, proxyTunnel: false });
    try {
      const response = await request("http://api.example.test/echo/undici", { dispatcher: agent });
      expect(response.statusCode).toBe(200);
      expect(((await response.body.json()) as EchoResponse).url).toBe("/echo/undici");
    } finally {
      await agent.close();
    }
  });

  it("the client's Host header can't pick another upstream: the URI's authority decides", async () => {
    const exchange = await rawRequest(
      proxy.port,
      "GET http://api.example.test/echo/h HTTP/1.1\r\nHost: scripts.example.test:8080\r\nConnection: close\r\n\r\n",
    );
    const echo = JSON.parse(exchange.responses[0]!.body) as EchoResponse;
    expect(echo.headers.find(([n]) => n.toLowerCase() === "x-version")).toBeUndefined();
  });

  it.each([
    ["another host", () => `http://localhost:${canaryPort}/x`, 403, "host_not_allowed"],
    ["an IPv4 literal", () => `http://127.0.0.1:${canaryPort}/x`, 400, "bad_request"],
    ["an integer IPv4", () => "http://2130706433/x", 400, "bad_request"],
    ["an IPv6 literal", () => `http://[::1]:${canaryPort}/x`, 400, "bad_request"],
    ["userinfo", () => "http://user:pw@api.example.test/x", 400, "bad_request"],
    [
      "userinfo hiding the real host",
      () => `http://api.example.test@localhost:${canaryPort}/x`,
      400,
      "bad_request",
    ],
    ["https://", () => "https://api.example.test/x", 400, "bad_request"],
    [
      "a known name on another port",
      () => "http://api.example.test:8443/x",
      403,
      "host_not_allowed",
    ],
    ["a trailing-dot name", () => "http://api.example.test./x", 403, "host_not_allowed"],
    ["another scheme", () => "ftp://api.example.test/x", 400, "bad_request"],
  ])("%s is refused and no connection is made anywhere", async (_name, target, status, code) => {
    const before = emulator().stats().apiRequests;
    const exchange = await rawRequest(
      proxy.port,
      `GET ${target()} HTTP/1.1\r\nHost: api.example.test\r\n\r\n`,
    );
    const response = exchange.responses[0]!;
    expect(response.status).toBe(status);
    expect(response.headers.get("bearer-proxy-error")).toEqual([code]);
    expect(canaryConnections).toBe(0);
    expect(emulator().stats().apiRequests).toBe(before);
  });

  it("a refused host is named as the client sent it, port included, with why (issue 32)", async () => {
    const refusal = async (url: string) => {
      const { stdout } = await run("curl", ["-sS", url], {
        env: { ...childEnv(), http_proxy: proxy.url },
      });
      return (JSON.parse(stdout) as { error: { code: string; message: string } }).error;
    };
    // A name match.hosts lists without a port (port 80), asked for on another port.
    expect(await refusal("http://api.example.test:8080/x")).toEqual({
      code: "host_not_allowed",
      message:
        'host api.example.test:8080 is not served by this proxy (match.hosts names api.example.test, which means port 80; list "api.example.test:8080" to serve this one)',
    });
    expect((await refusal("http://elsewhere.example.test:8080/x")).message).toBe(
      "host elsewhere.example.test:8080 is not served by this proxy",
    );
    // The hint for a local address reached through http_proxy stays.
    expect((await refusal(`http://localhost:${canaryPort}/x`)).message).toBe(
      `host localhost:${canaryPort} is not served by this proxy (a local address reached through http_proxy? exclude it: no_proxy=127.0.0.1,localhost)`,
    );
    expect(canaryConnections).toBe(0);
  });

  it("curl's CONNECT for an https:// URL gets 405 with an explanation", async () => {
    const result = await run(
      "curl",
      [
        "-sS",
        "-x",
        proxy.url,
        "-o",
        "/dev/null",
        "-w",
        "%{http_connect}",
        "https://api.example.test/x",
      ],
      { env: childEnv() },
    ).catch((err: { stdout: string; stderr: string }) => err);
    expect(result.stdout).toBe("405");
    const raw = await rawRequest(
      proxy.port,
      "CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\n\r\n",
    );
    const body = JSON.parse(raw.responses[0]!.body);
    expect(body.error.code).toBe("method_not_allowed");
    expect(body.error.message).toMatch(/http:\/\//);
    expect(raw.closed).toBe(true);
  });
});
