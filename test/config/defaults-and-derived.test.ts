/** A minimal file gets every documented default; derived values (URLs, headers) are computed; the result is frozen. */
import { afterAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import { DEFAULTS } from "../../src/config/normalize.js";
import type { ProxyConfig } from "../../src/config/proxy-config.js";
import { pemCaFile, removeTempDirs, UPSTREAM, yaml } from "./load-helpers.js";

afterAll(removeTempDirs);

const load = (text: string) => loadConfig({ configText: text, env: {} });

describe("defaults", () => {
  it("fills every default into a minimal file", async () => {
    const config = await load(`upstreams:${UPSTREAM}`);
    const tls = {
      caFile: undefined,
      certFile: undefined,
      keyFile: undefined,
      serverName: undefined,
    };
    const expected: ProxyConfig = {
      listen: { host: "127.0.0.1", port: 8080 },
      admin: { host: "127.0.0.1", port: 9901 },
      log: { level: "info", format: "json" },
      egressProxy: undefined,
      limits: {
        maxHeaderSizeBytes: 16 * 1024,
        maxHeaderCount: 100,
        maxUrlLengthBytes: 8 * 1024,
        headersTimeoutMs: 10_000,
        keepAliveTimeoutMs: 5_000,
        maxConnections: 10_000,
        maxPipelinedRequests: 16,
        maxRequestBodySizeBytes: 1024 * 1024 * 1024,
        minRequestBodyRate: 240,
        minResponseRate: 240,
        minDataRateGraceMs: 5_000,
        maxInFlight: 4096,
        maxUpgrades: 1024,
        sustainedOverloadMs: 10_000,
        maxWaiting: 10_000,
        maxWaitingPerCaller: 1_000,
      },
      paths: { mergeSlashes: true, escapedSlashes: "reject" },
      shutdown: { drainDelayMs: 5_000, timeoutMs: 30_000 },
      tokenCache: { redis: undefined, maxSources: 20_000, eagerLimit: 100 },
      callers: { basic: undefined, kubernetes: undefined },
      tracing: { exporter: undefined },
      intercept: undefined,
      readiness: { requireTokens: "all", chosenBy: "one-client" },
      upstreams: [
        {
          name: "api",
          baseUrl: "https://api.example.com",
          origin: "https://api.example.com",
          basePath: "",
          apiVersion: "default",
          versionHeader: undefined,
          token: {
            tokenUrl: "https://api.example.com/iam/v1/oauth2/token",
            versionHeader: undefined,
            format: "form",
            clientAuth: "body",
            basicEncoding: "form",
            privateKeyJwt: undefined,
            clientAssertionFile: undefined,
            clientId: { kind: "inline", value: "id" },
            clientSecret: { kind: "inline", value: "secret" },
            scope: undefined,
            extraParams: {},
            extraHeaders: {},
            tls,
            allowInsecureHttp: false,
            acceptTokenTypes: ["Bearer"],
            dpop: undefined,
          },
          tokenPolicy: {
            defaultExpiresInMs: 600_000,
            refreshWindow: [0.75, 0.85],
            requestTimeoutMs: 10_000,
            waitTimeoutMs: 5_000,
            minAgeBeforeInvalidateMs: 2_000,
            minRefreshIntervalMs: 1_000,
            initialBackoffMs: 1_000,
            maxBackoffMs: 30_000,
            prefetch: true,
            prefetchExplicit: false,
          },
          tls,
          match: { pathPrefix: "/", hosts: [] },
          stripPrefix: false,
          listen: undefined,
          allowInsecureHttp: false,
          clientCredentials: "strip",
          forwardedHeaders: false,
          headers: {},
          replayBodyLimitBytes: 1024 * 1024,
          connections: 128,
          maxResponseHeaderSizeBytes: 64 * 1024,
          timeouts: {
            connectMs: 10_000,
            responseHeadersMs: 30_000,
            bodyIdleMs: 60_000,
            idleConnectionMs: 4_000,
            queueMs: 5_000,
            upgradeIdleMs: 600_000,
          },
          maxRequestBodySizeBytes: undefined,
          upgrades: ["websocket"],
          http2: false,
          allow: undefined,
          rateLimit: undefined,
          pause: { scope: "upstream", maxPauseMs: 60_000, waitMs: 10_000 },
          retry: { attempts: 1, on: ["connect", "reset"], budgetPercent: 20 },
          intercept: false,
        },
      ],
    };
    expect(config).toStrictEqual(expected);
  });

  it("keeps all defaults in one DEFAULTS object", () => {
    expect(DEFAULTS.listen).toEqual({ host: "127.0.0.1", port: 8080 });
    expect(DEFAULTS.tokenCache.redis).toEqual({
      keyPrefix: "bearer-proxy:",
      lockTtl: "15s",
      commandTimeout: "500ms",
    });
  });

  it("applies Redis defaults when only the URL is given", async () => {
    const config = await load(
      `tokenCache:\n  redis: { url: "rediss://cache:6380" }\nupstreams:${UPSTREAM}`,
    );
    expect(config.tokenCache.redis).toEqual({
      url: "rediss://cache:6380",
      keyPrefix: "bearer-proxy:",
      lockTtlMs: 15_000,
      commandTimeoutMs: 500,
    });
  });

  it("defaults an upstream listener's host to 127.0.0.1 and a partial main listen to its defaults", async () => {
    const config = await load(yaml`
      listen: { port: 7000 }
      admin: { host: 0.0.0.0 }
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientId: id
          clientSecret: secret
          listen: { port: 7001 }
    `);
    expect(config.listen).toEqual({ host: "127.0.0.1", port: 7000 });
    expect(config.admin).toEqual({ host: "0.0.0.0", port: 9901 });
    expect(config.upstreams[0]?.listen).toEqual({ host: "127.0.0.1", port: 7001 });
  });
});

describe("derived values", () => {
  it("splits baseUrl into origin and basePath and appends the version's token path", async () => {
    const config = await load(yaml`
      upstreams:
        - name: api
          baseUrl: https://API.example.com:8443/tenant/a//
          apiVersion: scripting-preview
          clientId: id
          clientSecret: secret
    `);
    const u = config.upstreams[0]!;
    expect([u.baseUrl, u.origin, u.basePath]).toEqual([
      "https://api.example.com:8443/tenant/a",
      "https://api.example.com:8443",
      "/tenant/a",
    ]);
    expect(u.token.tokenUrl).toBe("https://api.example.com:8443/tenant/a/oauth2/token");
    expect(u.versionHeader).toBe("2026-09-01.scripting.preview");
  });

  it("uses tokenUrl over baseUrl + tokenPath, and an unknown version's literal value as X-Version", async () => {
    const config = await load(yaml`
      upstreams:
        - name: a
          baseUrl: https://api.example.com
          apiVersion: 2027-01-01.beta
          tokenPath: /beta/token
          clientId: id
          clientSecret: secret
        - name: b
          baseUrl: https://api.example.com
          apiVersion: 2027-01-01.beta
          tokenUrl: https://login.example.com/oauth2/token?tenant=x
          clientId: id
          clientSecret: secret
          match: { pathPrefix: /b }
        - name: c
          baseUrl: https://api.example.com
          tokenPath: /custom/token
          clientId: id
          clientSecret: secret
          match: { pathPrefix: /c }
    `);
    expect(config.upstreams.map((u) => [u.token.tokenUrl, u.versionHeader])).toEqual([
      ["https://api.example.com/beta/token", "2027-01-01.beta"],
      ["https://login.example.com/oauth2/token?tenant=x", "2027-01-01.beta"],
      ["https://api.example.com/custom/token", undefined],
    ]);
  });

  it("applies tls.serverName to the token endpoint only when it shares the base URL's origin", async () => {
    const config = await load(yaml`
      upstreams:
        - name: same
          baseUrl: https://10.0.0.5:8443
          clientId: id
          clientSecret: secret
          tls: { serverName: api.internal, caFile: ${pemCaFile()} }
        - name: other
          baseUrl: https://10.0.0.6
          tokenUrl: https://login.example.com/token
          clientId: id
          clientSecret: secret
          tls: { serverName: api.internal }
          match: { pathPrefix: /other }
    `);
    const [same, other] = config.upstreams;
    expect(same?.token.tls).toEqual(same?.tls);
    expect(other?.tls.serverName).toBe("api.internal");
    // login.example.com must be verified as itself, not as the upstream's name.
    expect(other?.token.tls).toEqual({ ...other?.tls, serverName: undefined });
  });

  it("lowercases header names and normalizes match.hosts to host:port", async () => {
    const config = await load(yaml`
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientId: id
          clientSecret: secret
          headers: { X-Team: Blue }
          tokenHeaders: { User-Agent: bp/1 }
          match: { hosts: [Sheets.Local, "sheets.local:8080"] }
    `);
    const u = config.upstreams[0]!;
    expect(u.headers).toEqual({ "x-team": "Blue" });
    expect(u.token.extraHeaders).toEqual({ "user-agent": "bp/1" });
    expect(u.match.hosts).toEqual(["sheets.local:80", "sheets.local:8080"]);
  });

  it("converts durations and sizes given in every unit", async () => {
    const config = await load(yaml`
      limits: { maxHeaderSize: 32768, maxUrlLength: 2KB, headersTimeout: 1.5s, keepAliveTimeout: 250 }
      shutdown: { drainDelay: 2m, timeout: 1h }
      upstreams:
        - name: api
          baseUrl: https://api.example.com
          clientId: id
          clientSecret: secret
          replayBodyLimit: 512B
    `);
    expect(config.limits.maxHeaderSizeBytes).toBe(32768);
    expect(config.limits.maxUrlLengthBytes).toBe(2000);
    expect(config.limits.headersTimeoutMs).toBe(1500);
    expect(config.limits.keepAliveTimeoutMs).toBe(250);
    expect(config.shutdown).toEqual({ drainDelayMs: 120_000, timeoutMs: 3_600_000 });
    expect(config.upstreams[0]?.replayBodyLimitBytes).toBe(512);
  });
});

describe("the result", () => {
  it("is deeply frozen", async () => {
    const config = await load(`upstreams:${UPSTREAM}`);
    const u = config.upstreams[0]!;
    for (const object of [
      config,
      config.listen,
      config.limits,
      config.upstreams,
      u,
      u.token,
      u.token.clientSecret,
      u.tls,
      u.match,
      u.match.hosts,
      u.headers,
      u.tokenPolicy.refreshWindow,
    ]) {
      expect(Object.isFrozen(object)).toBe(true);
    }
    expect(() => {
      (config.listen as { port: number }).port = 1;
    }).toThrow(TypeError);
    expect(() => (config.upstreams as unknown[]).push({})).toThrow(TypeError);
  });
});
