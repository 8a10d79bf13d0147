import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import type { EchoResponse } from "../../src/emulator/index.js";
import { useEmulator } from "../helpers/emulator.js";
import { rawRequest } from "../helpers/raw-http.js";
import { startTestProxy, type TestProxy } from "./harness.js";

/**
 * What the upstream receives, for both API versions, through the real emulator and real token
 * sources. Requests are written as raw bytes so hop-by-hop fields reach the proxy exactly.
 */

function names(echo: EchoResponse): string[] {
  return echo.headers.map(([name]) => name.toLowerCase());
}

function values(echo: EchoResponse, name: string): string[] {
  return echo.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
}

const HOSTILE_HEADERS =
  "Authorization: Basic dXNlcjpwYXNz\r\n" +
  "X-Version: 1999-01-01\r\n" +
  "Connection: keep-alive, authorization, x-version, host, x-drop-me\r\n" +
  "X-Drop-Me: 1\r\n" +
  "Keep-Alive: timeout=5\r\n" +
  "Proxy-Connection: keep-alive\r\n" +
  "TE: trailers\r\n" +
  "Upgrade: websocket\r\n" +
  "Proxy-Authorization: Basic cHJveHk6c2VjcmV0\r\n" +
  "Forwarded: for=10.0.0.1\r\n" +
  "X-Forwarded-For: 10.0.0.1\r\n" +
  "X-Forwarded-Host: evil.example\r\n" +
  "X-Forwarded-Proto: https\r\n" +
  "X-Kept: one\r\n" +
  "x-kept: two\r\n" +
  "Accept: application/json\r\n";

describe("headers the upstream receives", () => {
  const emulator = useEmulator();
  let proxy: TestProxy;

  beforeAll(async () => {
    proxy = await startTestProxy({
      caPem: emulator().caPem,
      tokens: "real",
      config: {
        upstreams: [
          { name: "platform", baseUrl: emulator().url, match: { pathPrefix: "/" } },
          {
            name: "preview",
            baseUrl: emulator().url,
            apiVersion: "scripting-preview",
            match: { pathPrefix: "/preview" },
            stripPrefix: true,
          },
          {
            name: "forwarding",
            baseUrl: emulator().url,
            match: { pathPrefix: "/fwd" },
            stripPrefix: true,
            forwardedHeaders: true,
            headers: { "X-Team": "payments" },
          },
          {
            name: "strict",
            baseUrl: emulator().url,
            match: { pathPrefix: "/strict" },
            stripPrefix: true,
            clientCredentials: "reject",
          },
        ],
      },
    });
  });
  afterAll(() => proxy.close());

  async function echoThrough(path: string, extraHeaders: string) {
    const exchange = await rawRequest(
      proxy.port,
      `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${proxy.port}\r\n${extraHeaders}Connection: close\r\n\r\n`,
    );
    const response = exchange.responses[0]!;
    return { response, echo: JSON.parse(response.body || "{}") as EchoResponse };
  }

  it("default version: one Bearer authorization, no X-Version, hop-by-hop and forwarding fields gone", async () => {
    const { response, echo } = await echoThrough("/echo/default", HOSTILE_HEADERS);
    expect(response.status).toBe(200);
    const auth = values(echo, "authorization");
    expect(auth).toHaveLength(1);
    expect(auth[0]).toMatch(/^Bearer [A-Za-z0-9\-._~+/]+=*$/);
    expect(values(echo, "x-version")).toEqual([]);
    expect(values(echo, "host")).toEqual([new URL(emulator().url).host]);
    for (const dropped of [
      "keep-alive",
      "proxy-connection",
      "te",
      "upgrade",
      "proxy-authorization",
      "forwarded",
      "x-forwarded-for",
      "x-forwarded-host",
      "x-forwarded-proto",
      "x-drop-me",
      "transfer-encoding",
    ]) {
      expect(names(echo)).not.toContain(dropped);
    }
    // The only Connection field is undici's own.
    expect(values(echo, "connection")).toEqual(["keep-alive"]);
    // Everything else arrives in order, duplicates and case kept.
    expect(echo.headers.filter(([n]) => n.toLowerCase() === "x-kept")).toEqual([
      ["X-Kept", "one"],
      ["x-kept", "two"],
    ]);
    expect(values(echo, "accept")).toEqual(["application/json"]);
  });

  it("preview version: Bearer token for the preview plus X-Version, client's replaced", async () => {
    const { response, echo } = await echoThrough("/preview/echo/p", HOSTILE_HEADERS);
    expect(response.status).toBe(200);
    expect(echo.url).toBe("/echo/p");
    expect(values(echo, "x-version")).toEqual([SCRIPTING_PREVIEW_HEADER]);
    const auth = values(echo, "authorization");
    expect(auth).toHaveLength(1);
    expect(auth[0]!.startsWith("Bearer ")).toBe(true);
    expect(auth[0]!.slice(7)).not.toContain(" ");
  });

  it("the real preview API answers through the proxy (/scripts)", async () => {
    const exchange = await rawRequest(
      proxy.port,
      `GET /preview/scripts HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`,
    );
    expect(exchange.responses[0]!.status).toBe(200);
    expect(JSON.parse(exchange.responses[0]!.body).scripts).toHaveLength(2);
  });

  it("X-Forwarded-* are ours when opted in, and static headers are added", async () => {
    const { response, echo } = await echoThrough(
      "/fwd/echo/f",
      `${HOSTILE_HEADERS}X-Team: spoofed\r\n`,
    );
    expect(response.status).toBe(200);
    expect(values(echo, "x-forwarded-for")).toEqual(["127.0.0.1"]);
    expect(values(echo, "x-forwarded-proto")).toEqual(["http"]);
    expect(values(echo, "x-forwarded-host")).toEqual([`127.0.0.1:${proxy.port}`]);
    expect(values(echo, "forwarded")).toEqual([]);
    expect(values(echo, "x-team")).toEqual(["payments"]);
  });

  it("clientCredentials: reject answers 400 to a client that sends its own Authorization", async () => {
    const withAuth = await rawRequest(
      proxy.port,
      "GET /strict/echo/s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer mine\r\nConnection: close\r\n\r\n",
    );
    expect(withAuth.responses[0]!.status).toBe(400);
    expect(withAuth.responses[0]!.headers.get("bearer-proxy-error")).toEqual(["bad_request"]);
    const withVersion = await rawRequest(
      proxy.port,
      "GET /strict/echo/s HTTP/1.1\r\nHost: x\r\nX-Version: 1\r\nConnection: close\r\n\r\n",
    );
    expect(withVersion.responses[0]!.status).toBe(400);
    const clean = await rawRequest(
      proxy.port,
      "GET /strict/echo/s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    expect(clean.responses[0]!.status).toBe(200);
  });
});
