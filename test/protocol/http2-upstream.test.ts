import { createHash } from "node:crypto";
import { Readable } from "node:stream";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { DEMO_CLIENT, type Emulator, startEmulator } from "../../src/emulator/index.js";
import { type AppUnderTest, startAppUnderTest } from "../helpers/app-under-test.js";
import { createTestPki, type TestPki } from "../helpers/tls.js";
import { downloadSha256, type H2Upstream, startH2Upstream } from "./h2-upstream.js";

/**
 * Issue 15 item 8: `upstreams[].http2: true` against a real node:http2 server that speaks only
 * h2 (allowHTTP1 false): the same injection, streaming, 401 replay, error mapping and metrics as
 * over HTTP/1.1, on one multiplexed TLS connection — and Upgrade requests still on HTTP/1.1.
 */

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");

interface Echo {
  method: string;
  url: string;
  httpVersion: string;
  headers: Record<string, string | string[]>;
  bodyLength: number;
  bodySha256: string;
}

describe("HTTP/2 to the upstream", () => {
  let pki: TestPki;
  let emulator: Emulator;
  let h2: H2Upstream;
  let app: AppUnderTest;
  const client = new Agent({ connections: 64 });

  beforeAll(async () => {
    pki = await createTestPki();
    emulator = await startEmulator({
      host: "127.0.0.1",
      port: 0,
      tls: { ...pki.good, caPem: pki.caPem },
    });
    h2 = await startH2Upstream({ cert: pki.good });
    const common = {
      ...DEMO_CLIENT,
      tokenUrl: `${emulator.url}/oauth2/token`,
      http2: true,
      token: { minAgeBeforeInvalidate: "0ms", minRefreshInterval: "0ms" },
    };
    app = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        upstreams: [
          {
            ...common,
            name: "h2",
            baseUrl: h2.origin,
            apiVersion: "scripting-preview",
            replayBodyLimit: "64KiB",
          },
          {
            ...common,
            name: "h2-slow",
            baseUrl: h2.origin,
            apiVersion: "scripting-preview",
            match: { pathPrefix: "/slow" },
            timeouts: { responseHeaders: "500ms" },
          },
        ],
      },
    });
  });
  afterAll(async () => {
    await client.close();
    await app?.close();
    await h2?.close();
    await emulator?.close();
  });

  const get = async (path: string) => {
    const res = await request(`${app.url}${path}`, { dispatcher: client });
    return {
      status: res.statusCode,
      headers: res.headers,
      body: Buffer.from(await res.body.arrayBuffer()),
    };
  };

  it("forwards over h2 with Authorization and X-Version injected, client credentials replaced", async () => {
    const res = await request(`${app.url}/echo/one?q=1`, {
      dispatcher: client,
      headers: { authorization: "Basic eDp5", "x-version": "old", "x-kept": "yes" },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers["x-upstream"]).toBe("h2");
    const echo = (await res.body.json()) as Echo;
    expect(echo.httpVersion).toBe("2.0");
    expect(echo.url).toBe("/echo/one?q=1");
    expect(echo.headers.authorization).toMatch(/^Bearer \S+$/);
    expect(echo.headers.authorization).not.toBe("Basic eDp5");
    expect(echo.headers["x-version"]).toBe("2026-09-01.scripting.preview");
    expect(echo.headers["x-kept"]).toBe("yes");
    expect(echo.headers[":authority"]).toBe(new URL(h2.origin).host);
  });

  it("50 concurrent requests share one TLS connection", async () => {
    const before = h2.tlsHandshakes();
    const statuses = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => (await get(`/echo/c${i}`)).status),
    );
    expect(statuses.every((s) => s === 200)).toBe(true);
    // The first test opened the connection; these reused it.
    expect(h2.tlsHandshakes() - before).toBe(0);
    expect(h2.sessions()).toBe(1);
  });

  it("streams a 4 MiB download and a 3 MiB upload (over replayBodyLimit) intact", async () => {
    const download = await get("/download/4194304");
    expect(download.status).toBe(200);
    expect(download.body.length).toBe(4 * 1024 * 1024);
    expect(sha256(download.body)).toBe(downloadSha256(4 * 1024 * 1024));

    const upload = Buffer.alloc(3 * 1024 * 1024, 9);
    const res = await request(`${app.url}/echo/upload`, {
      dispatcher: client,
      method: "POST",
      headers: { "content-length": String(upload.length) },
      body: Readable.from([upload.subarray(0, 1_000_000), upload.subarray(1_000_000)]),
    });
    const echo = (await res.body.json()) as Echo;
    expect(res.statusCode).toBe(200);
    expect(echo.bodyLength).toBe(upload.length);
    expect(echo.bodySha256).toBe(sha256(upload));
  });

  it("concurrent GETs and POSTs are multiplexed, not sent one at a time", async () => {
    for (const method of ["GET", "POST"] as const) {
      const answers = await Promise.all(
        Array.from({ length: 5 }, async () => {
          const res = await request(`${app.url}/barrier/5`, {
            dispatcher: client,
            method,
            ...(method === "POST" ? { body: "x".repeat(100) } : {}),
          });
          return ((await res.body.json()) as { together: number }).together;
        }),
      );
      expect(answers, method).toEqual([5, 5, 5, 5, 5]);
    }
  });

  it("an upstream 401 gets a new token and one replay", async () => {
    const res = await get("/once-401/x");
    expect(res.status).toBe(200);
    expect(res.body.toString()).toBe("second token accepted");
    const seen = h2.requests
      .filter((r) => r.url === "/once-401/x")
      .map((r) => r.headers.authorization);
    expect(seen).toHaveLength(2);
    expect(seen[0]).not.toBe(seen[1]);
  });

  it("maps a stream reset to 502 and a late answer to 504, with the error contract", async () => {
    const reset = await get("/reset");
    expect(reset.status).toBe(502);
    expect(reset.headers["bearer-proxy-error"]).toBe("upstream_reset");
    const slow = await get("/slow/3000");
    expect(slow.status).toBe(504);
    expect(slow.headers["bearer-proxy-error"]).toBe("upstream_timeout");
    // The connection survived both.
    expect((await get("/echo/after-errors")).status).toBe(200);
  });

  it("counts h2 requests in the metrics and the access log like any other", async () => {
    const metrics = await app.app.metrics.registry.getSingleMetricAsString(
      "bearer_proxy_requests_total",
    );
    expect(metrics).toMatch(/upstream="h2",method="GET",status_class="2xx"} [1-9]/);
    expect(metrics).toMatch(/upstream="h2",method="GET",status_class="5xx"} [1-9]/);
    const lines = app.records.filter((r) => r.msg === "request" && r.path === "/once-401/x");
    expect(lines.at(-1)).toMatchObject({ status: 200, replayed: true });
  });
});

describe("Upgrade with http2: true", () => {
  it("uses HTTP/1.1 for the WebSocket handshake while requests use h2", async () => {
    const pki = await createTestPki();
    const emulator = await startEmulator({
      host: "127.0.0.1",
      port: 0,
      tls: { ...pki.good, caPem: pki.caPem },
    });
    // h2 for requests, HTTP/1.1 (and its Upgrade) for WebSocket, on one port.
    const both = await startH2Upstream({ cert: pki.good, allowHTTP1: true });
    const wss = new WebSocketServer({ server: both.server as never });
    const handshakeVersions: string[] = [];
    wss.on("connection", (ws, req) => {
      handshakeVersions.push(req.httpVersion);
      ws.on("message", (data) => ws.send(data as Buffer));
    });
    const app = await startAppUnderTest({
      caPem: pki.caPem,
      config: {
        upstreams: [
          {
            ...DEMO_CLIENT,
            name: "both",
            baseUrl: both.origin,
            tokenUrl: `${emulator.url}/iam/v1/oauth2/token`,
            http2: true,
          },
        ],
      },
    });
    try {
      const res = await request(`${app.url}/echo/plain`);
      expect(((await res.body.json()) as Echo).httpVersion).toBe("2.0");
      const ws = await new Promise<WebSocket>((resolve, reject) => {
        const socket = new WebSocket(`${app.url.replace("http", "ws")}/socket`);
        socket.on("open", () => resolve(socket));
        socket.on("error", reject);
        socket.on("unexpected-response", (_r, r) => reject(new Error(`status ${r.statusCode}`)));
      });
      const echoed = new Promise<string>((r) => ws.once("message", (d: Buffer) => r(d.toString())));
      ws.send("over http/1.1");
      expect(await echoed).toBe("over http/1.1");
      expect(handshakeVersions).toEqual(["1.1"]);
      ws.close();
    } finally {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      await app.close();
      await both.close();
      await emulator.close();
    }
  });
});
