/**
 * Issue 30, item 1: a path rule could be walked around. Routes matched the raw request bytes
 * while upstreams decode them, so with `admin` on `/admin/` (allow: alice) and a catch-all `/`
 * on the same backend, `/%61dmin/x`, `/adm%69n/x`, `/admin%2fx` and `//admin/x` went through the
 * catch-all — its token injected, no credential asked — and the backend served `/admin/x`.
 *
 * The real app (htpasswd callers, the emulator as token endpoint) in front of a recording TLS
 * upstream that also speaks WebSocket; one gateway per `paths` mode. Each request goes out on a
 * raw socket, so its target reaches the proxy byte for byte.
 */
import type { IncomingMessage } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { type AppUnderTest, loadTestConfig, startAppUnderTest } from "../helpers/app-under-test.js";
import { accessLines, adminText, basicHeader, htpasswdFile } from "../helpers/callers-fixture.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import { type FakeUpstream, startFakeUpstream } from "../helpers/fake-upstreams.js";
import { rawRequest } from "../helpers/raw-http.js";
import { createTestPki } from "../helpers/tls.js";

const ALICE = basicHeader("alice", "alice-path-pw");
const FILES = { "callers.htpasswd": htpasswdFile({ alice: "alice-path-pw" }) };

interface Outcome {
  status: number;
  /** The proxy's `bearer-proxy-error`, when it answered itself. */
  code: string | undefined;
  /** Request targets the upstream received for this request (none when refused). */
  seen: string[];
}

describe("issue 30: no path around an allow rule", () => {
  let emulator: Emulator;
  let upstream: FakeUpstream;
  let wss: WebSocketServer;
  /** WebSocket handshake targets the upstream received. */
  const handshakes: string[] = [];
  const gateways: AppUnderTest[] = [];
  let defaults: AppUnderTest;
  let unescaping: AppUnderTest;
  let keeping: AppUnderTest;
  let noMerge: AppUnderTest;

  /** admin on /admin/ for alice only, a catch-all on /, both on the same backend; twice more
   * for absolute-form (HTTP_PROXY) clients of host api.internal. */
  const configOf = (paths?: Record<string, unknown>) => {
    const upstreamOf = (name: string, fields: Record<string, unknown>) => ({
      name,
      baseUrl: upstream.origin,
      tokenUrl: `${emulator.url}/iam/v1/oauth2/token`,
      clientId: "demo-client",
      clientSecret: "demo-secret",
      ...fields,
    });
    const admin = { allow: [{ user: "alice" }] };
    return {
      ...(paths ? { paths } : {}),
      callers: { basic: { usersFile: "callers.htpasswd" } },
      upstreams: [
        upstreamOf("admin", { match: { pathPrefix: "/admin/" }, ...admin }),
        upstreamOf("public", { match: { pathPrefix: "/" } }),
        upstreamOf("admin-proxied", {
          match: { pathPrefix: "/admin/", hosts: ["api.internal"] },
          ...admin,
        }),
        upstreamOf("public-proxied", { match: { pathPrefix: "/", hosts: ["api.internal"] } }),
      ],
    };
  };
  const startGateway = async (paths?: Record<string, unknown>) => {
    const gateway = await startAppUnderTest({
      caPem: pki.caPem,
      files: FILES,
      config: configOf(paths),
    });
    gateways.push(gateway);
    return gateway;
  };
  let pki: Awaited<ReturnType<typeof createTestPki>>;

  beforeAll(async () => {
    pki = await createTestPki();
    emulator = await startTlsEmulator(pki);
    upstream = await startFakeUpstream({
      cert: pki.good,
      // Only the proxy's injected token gets in: a request served proves the route's token.
      authorize: (authorization) => /^Bearer \S+$/.test(authorization ?? ""),
      handler: (_req, res) => {
        res.writeHead(200, { "content-type": "text/plain", "content-length": 2 });
        res.end("ok");
      },
    });
    wss = new WebSocketServer({
      server: upstream.server,
      verifyClient: (info: { req: IncomingMessage }) => {
        handshakes.push(info.req.url ?? "");
        return /^Bearer \S+$/.test(info.req.headers.authorization ?? "");
      },
    });
    [defaults, unescaping, keeping, noMerge] = await Promise.all([
      startGateway(),
      startGateway({ escapedSlashes: "unescape" }),
      startGateway({ escapedSlashes: "keep" }),
      startGateway({ mergeSlashes: false }),
    ]);
  });
  afterAll(async () => {
    await Promise.all(gateways.map((gateway) => gateway.close()));
    for (const client of wss?.clients ?? []) client.terminate();
    wss?.close();
    await upstream?.close();
    await emulator?.close();
  });

  /** One GET on a raw socket: `target` exactly as written. */
  async function send(
    gateway: AppUnderTest,
    target: string,
    headers: Record<string, string> = {},
  ): Promise<Outcome> {
    const before = upstream.requests.length;
    const host = target.startsWith("http://") ? new URL(target).host : "127.0.0.1";
    const head = [
      `GET ${target} HTTP/1.1`,
      `Host: ${host}`,
      ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
      "Connection: close",
    ].join("\r\n");
    const exchange = await rawRequest(Number(new URL(gateway.url).port), `${head}\r\n\r\n`);
    const response = exchange.responses[0]!;
    return {
      status: response.status,
      code: response.headers.get("bearer-proxy-error")?.[0],
      seen: upstream.requests.slice(before).map((request) => request.url),
    };
  }
  const asAlice = { "Proxy-Authorization": ALICE };
  const refused = (status: number, code: string): Outcome => ({ status, code, seen: [] });
  const served = (path: string): Outcome => ({ status: 200, code: undefined, seen: [path] });

  describe("escapedSlashes: reject, mergeSlashes: true (the defaults)", () => {
    it.each(["/%61dmin/x", "/adm%69n/x", "/%61%64%6d%69%6e/x", "//admin/x", "//%61dmin///x"])(
      "%s is routed to admin: 407 without a credential, the upstream sees nothing",
      async (target) => {
        expect(await send(defaults, target)).toEqual(refused(407, "caller_unauthenticated"));
      },
    );

    it.each(["/%61dmin/x", "/adm%69n/x", "//admin/x", "/admin//x", "/admin/%78"])(
      "%s with alice's credential: the upstream receives /admin/x",
      async (target) => {
        expect(await send(defaults, target, asAlice)).toEqual(served("/admin/x"));
      },
    );

    it("/admin%2fx and /admin%2Fx: 400 ambiguous_path, nothing forwarded, credential or not", async () => {
      for (const target of ["/admin%2fx", "/admin%2Fx", "/%2fadmin/x", "/x%2f..%2fadmin"]) {
        const expected =
          target === "/x%2f..%2fadmin"
            ? refused(400, "bad_request") // a dot-segment behind it: refused as before
            : refused(400, "ambiguous_path");
        expect(await send(defaults, target)).toEqual(expected);
        expect(await send(defaults, target, asAlice)).toEqual(expected);
      }
    });

    it("leaves the query string as it came", async () => {
      expect(await send(defaults, "/adm%69n/x?q=%61%2f//%7e&r=a%2Fb", asAlice)).toEqual(
        served("/admin/x?q=%61%2f//%7e&r=a%2Fb"),
      );
      expect(await send(defaults, "/x?next=/admin%2fx")).toEqual(served("/x?next=/admin%2fx"));
    });

    it("normalizes absolute-form (HTTP_PROXY) targets the same way", async () => {
      for (const target of ["http://api.internal/%61dmin/x", "http://api.internal//admin/x"]) {
        expect(await send(defaults, target)).toEqual(refused(407, "caller_unauthenticated"));
        expect(await send(defaults, target, asAlice)).toEqual(served("/admin/x"));
      }
      expect(await send(defaults, "http://api.internal/admin%2fx")).toEqual(
        refused(400, "ambiguous_path"),
      );
    });

    it("writes the normalized path on the access line", async () => {
      await send(defaults, "/adm%69n/logged?q=%61", asAlice);
      const line = accessLines(defaults.records).find((l) => l.path === "/admin/logged");
      expect(line).toMatchObject({ upstream: "admin", status: 200, caller: "user:alice" });
      expect(accessLines(defaults.records).some((l) => l.path.includes("%69"))).toBe(false);
    });

    it("counts ambiguous_path among the refusals by code", async () => {
      await send(defaults, "/admin%2fcounted");
      const metrics = await adminText(defaults.adminUrl, "/metrics");
      const sample =
        /^bearer_proxy_errors_total\{upstream="none",code="ambiguous_path"\} (\d+)$/m.exec(metrics);
      expect(Number(sample?.[1])).toBeGreaterThanOrEqual(1);
    });
  });

  describe("escapedSlashes: unescape", () => {
    it("/admin%2fx is decoded, then routed to admin and forwarded decoded", async () => {
      expect(await send(unescaping, "/admin%2fx")).toEqual(refused(407, "caller_unauthenticated"));
      expect(await send(unescaping, "/admin%2Fx", asAlice)).toEqual(served("/admin/x"));
      // A decoded slash merges like a literal one.
      expect(await send(unescaping, "/%2Fadmin%2f%2fx", asAlice)).toEqual(served("/admin/x"));
    });
  });

  describe("escapedSlashes: keep", () => {
    it("/admin%2fx does not match /admin/: the catch-all forwards it as /admin%2Fx", async () => {
      expect(await send(keeping, "/admin%2fx")).toEqual(served("/admin%2Fx"));
      expect(await send(keeping, "/%61dmin%2Fx")).toEqual(served("/admin%2Fx"));
      // Unreserved characters are still decoded: no way around /admin/ there.
      expect(await send(keeping, "/%61dmin/x")).toEqual(refused(407, "caller_unauthenticated"));
    });
  });

  describe("mergeSlashes: false", () => {
    it("//admin/x does not match /admin/: the catch-all forwards it as //admin/x", async () => {
      expect(await send(noMerge, "//admin/x")).toEqual(served("//admin/x"));
      expect(await send(noMerge, "/%61dmin/x")).toEqual(refused(407, "caller_unauthenticated"));
      expect(await send(noMerge, "/admin//x", asAlice)).toEqual(served("/admin//x"));
      expect(await send(noMerge, "/admin%2fx")).toEqual(refused(400, "ambiguous_path"));
    });
  });

  it.each([
    "/admin/%2e%2e/x",
    "/%2e%2e/admin/x",
    "/%2E./admin/x",
    "/admin/..%2fx",
    "/admin/.%2e%2Fx",
    "/public/..%2f..%2fadmin/x",
    "/admin%5cx",
    "/admin%5Cx",
    "/admin\\x",
    "/admin/%252e%252e/x",
    "/admin/%2e%2e;/x",
    "/adm%zzin/x",
    "/admin/%",
  ])("%s: 400 bad_request in every mode, nothing forwarded", async (target) => {
    for (const gateway of [defaults, unescaping, keeping, noMerge]) {
      expect(await send(gateway, target, asAlice)).toEqual(refused(400, "bad_request"));
    }
  });

  describe("WebSocket handshakes", () => {
    /** A handshake's outcome: 101, or the proxy's refusal. */
    function handshake(gateway: AppUnderTest, path: string, headers: Record<string, string> = {}) {
      return new Promise<{ status: number; code: string | undefined }>((resolve, reject) => {
        const ws = new WebSocket(`${gateway.url.replace(/^http:/, "ws:")}${path}`, { headers });
        ws.on("open", () => {
          ws.close();
          resolve({ status: 101, code: undefined });
        });
        ws.on("unexpected-response", (_req, res: IncomingMessage) => {
          res.resume();
          const code = res.headers["bearer-proxy-error"];
          resolve({
            status: res.statusCode ?? 0,
            code: typeof code === "string" ? code : undefined,
          });
        });
        ws.on("error", reject);
      });
    }

    it("are normalized like plain requests: routed to admin, forwarded as /admin/chat", async () => {
      const before = handshakes.length;
      expect(await handshake(defaults, "/%61dmin/chat")).toEqual({
        status: 407,
        code: "caller_unauthenticated",
      });
      expect(await handshake(defaults, "/admin%2fchat")).toEqual({
        status: 400,
        code: "ambiguous_path",
      });
      expect(handshakes.length).toBe(before);
      expect(await handshake(defaults, "//adm%69n/chat", asAlice)).toEqual({
        status: 101,
        code: undefined,
      });
      expect(handshakes.slice(before)).toEqual(["/admin/chat"]);
    });
  });

  it("a reload applies a new paths setting to the next requests", async () => {
    const gateway = await startGateway();
    expect(await send(gateway, "/admin%2fx", asAlice)).toEqual(refused(400, "ambiguous_path"));
    const next = await loadTestConfig({
      caPem: pki.caPem,
      files: FILES,
      config: configOf({ escapedSlashes: "unescape" }),
    });
    try {
      expect(await gateway.app.reload(next.config)).toEqual({ outcome: "applied" });
      expect(await send(gateway, "/admin%2fx", asAlice)).toEqual(served("/admin/x"));
      expect(await send(gateway, "/admin%2fx")).toEqual(refused(407, "caller_unauthenticated"));
    } finally {
      next.cleanup();
    }
  });
});
