/**
 * Issue #25, "Secrets": through the real proxy — a client sending its own Authorization and
 * Proxy-Authorization and a query string full of secrets, a token fetch with a client secret,
 * an upstream 401 and its replay with a new token, a token endpoint that echoes the secret in
 * its error — and then no span (name, attribute, event, link, resource) holds any of it, nor
 * the collector's API key; the log names the collector header, never its value.
 */
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EchoResponse, Emulator } from "../../src/emulator/index.js";
import { startTlsEmulator } from "../helpers/emulator.js";
import type { CollectedSpan } from "../helpers/otlp-receiver.js";
import { createTestPki } from "../helpers/tls.js";
import { echoedHeader, startTracedProxy, type TracedProxy } from "./proxy-fixture.js";
import { PROTOCOLS } from "./tracing-fixture.js";

const CLIENT_ID = "trace-leak-client";
const CLIENT_SECRET = "client-secret-Zq81+/=";
const CLIENT_AUTHORIZATION = "Bearer client-own-credential-4711";
const PROXY_AUTHORIZATION = "Basic cHJveHktdXNlcjpwcm94eS1wYXNzLTk5";
const QUERY_SECRETS = ["query-signature-5150", "query-token-8080"];
const COLLECTOR_KEY = "collector-api-key-2468";

/** Every span, as one text (bytes as hex, bigints as digits). */
function spansText(spans: readonly CollectedSpan[]): string {
  return JSON.stringify(spans, (_key, value: unknown) =>
    typeof value === "bigint"
      ? value.toString()
      : value instanceof Uint8Array
        ? Buffer.from(value).toString("latin1")
        : value,
  );
}

describe.each(PROTOCOLS)("no secrets in spans over %s", (protocol) => {
  let emulator: Emulator;
  let proxy: TracedProxy;
  const tokens = new Set<string>();

  const send = async (path: string) => {
    const response = await request(`${proxy.url}${path}`, {
      headers: {
        authorization: CLIENT_AUTHORIZATION,
        "proxy-authorization": PROXY_AUTHORIZATION,
        traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      },
    });
    const text = await response.body.text();
    if (response.statusCode === 200) {
      const echo = JSON.parse(text) as EchoResponse;
      tokens.add(echoedHeader(echo, "authorization").replace(/^Bearer /, ""));
    }
    return response.statusCode;
  };

  beforeAll(async () => {
    const pki = await createTestPki();
    emulator = await startTlsEmulator(pki, {
      clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET }],
    });
    proxy = await startTracedProxy({
      caPem: pki.caPem,
      protocol,
      env: { OTEL_EXPORTER_OTLP_HEADERS: `x-api-key=${encodeURIComponent(COLLECTOR_KEY)}` },
      upstreams: [
        {
          name: "sheets",
          baseUrl: emulator.url,
          clientId: CLIENT_ID,
          clientSecret: CLIENT_SECRET,
          token: {
            minAgeBeforeInvalidate: "0ms",
            minRefreshInterval: "0ms",
            waitTimeout: "500ms",
            initialBackoff: "100ms",
          },
        },
      ],
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await emulator.close();
  });

  it("leaks no credential, token, query or collector key into any span", async () => {
    const query = `?sig=${QUERY_SECRETS[0]}&access_token=${QUERY_SECRETS[1]}`;
    expect(await send(`/echo/first${query}`)).toBe(200);
    emulator.revokeAllTokens();
    expect(await send(`/echo/replayed${query}`)).toBe(200);
    expect(tokens.size).toBe(2);

    // A token endpoint that echoes what it got (the secret) in its error, met by a replay.
    emulator.setTokenFault((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            error: "server_error",
            error_description: `cannot process ${Buffer.concat(chunks).toString("utf8")}`,
          }),
        );
      });
    });
    emulator.revokeAllTokens();
    // The revoked token is dropped, no new one comes: the upstream's 401 stands.
    expect(await send(`/echo/no-token${query}`)).toBe(401);
    // And the next request waits for a token in vain (its token wait fails).
    expect(await send(`/echo/waits${query}`)).toBe(503);
    emulator.setTokenFault(undefined);

    const spans = await proxy.flushed();
    expect(spans.filter((s) => s.kind === "server")).toHaveLength(4);
    // The first request's, the two replays' (one in vain) and the last request's.
    expect(spans.filter((s) => s.name === "token wait")).toHaveLength(4);
    expect(spans.filter((s) => s.kind === "client").length).toBeGreaterThanOrEqual(3);
    expect(proxy.receiver.exports[0]?.headers["x-api-key"]).toBe(COLLECTOR_KEY);

    const text = spansText(spans);
    const secrets = [
      CLIENT_SECRET,
      encodeURIComponent(CLIENT_SECRET),
      CLIENT_AUTHORIZATION,
      "client-own-credential-4711",
      PROXY_AUTHORIZATION,
      "cHJveHktdXNlcjpwcm94eS1wYXNzLTk5",
      COLLECTOR_KEY,
      ...QUERY_SECRETS,
      ...tokens,
    ];
    for (const secret of secrets) expect(text, secret).not.toContain(secret);
    for (const span of spans) {
      for (const [key, value] of Object.entries(span.attributes)) {
        expect(key).not.toMatch(/authorization|cookie|header/i);
        if (key.startsWith("url.")) expect(String(value)).not.toContain("?");
      }
    }

    // The log names the collector header, never its value.
    const log = proxy.lines.join("");
    expect(log).not.toContain(COLLECTOR_KEY);
    expect(
      proxy.records.find((r) => r.msg === "tracing on: exporting spans over OTLP"),
    ).toMatchObject({ headers: ["x-api-key"] });
  });
});
