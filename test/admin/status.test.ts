import { afterEach, describe, expect, it } from "vitest";
import {
  STATUS_PAGE_CSP,
  STATUS_SCRIPT_PATH,
  STATUS_STYLE_PATH,
} from "../../src/admin/status-page.js";
import { fingerprint } from "../../src/base/fingerprint.js";
import {
  buildTestAdmin,
  failedStatus,
  makeUpstreamConfig,
  NOW_WALL_MS,
  type TestAdmin,
  validStatus,
} from "./helpers.js";

const BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

describe("GET /status", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  function twoUpstreams(): TestAdmin {
    return buildTestAdmin({
      upstreams: [
        makeUpstreamConfig("files"),
        makeUpstreamConfig("scripts", {
          baseUrl: "https://scripts.example.test",
          apiVersion: "scripting-preview",
        }),
      ],
      statuses: {
        files: validStatus("token-one"),
        scripts: failedStatus("BP_ERR_TOKEN_REJECTED", "answered 401 (invalid_client)"),
      },
    });
  }

  it("reports version, uptime, phase and each upstream's token state and request counts as JSON", async () => {
    admin = twoUpstreams();
    const m = admin.metrics;
    m.requestsTotal.inc({ upstream: "files", method: "GET", status_class: "2xx" }, 5);
    m.requestsTotal.inc({ upstream: "files", method: "POST", status_class: "2xx" }, 2);
    m.requestsTotal.inc({ upstream: "files", method: "GET", status_class: "5xx" });
    m.requestsInFlight.inc({ upstream: "files" });
    m.errorsTotal.inc({ upstream: "scripts", code: "token_unavailable" }, 4);
    m.replaysTotal.inc({ upstream: "files" }, 2);

    const res = await admin.app.inject({ method: "GET", url: "/status" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^application\/json/);
    expect(res.headers["cache-control"]).toBe("no-store");
    const body = res.json();
    expect(body).toMatchObject({
      version: "9.9.9-test",
      phase: "running",
      ready: false,
      uptimeSeconds: 3725,
      startedAt: new Date(NOW_WALL_MS - 3_725_000).toISOString(),
    });
    expect(body.upstreams[0]).toEqual({
      name: "files",
      baseUrl: "https://files.example.test",
      apiVersion: "default",
      tokenUrl: "https://files.example.test/iam/v1/oauth2/token",
      route: { listen: null, hosts: [], pathPrefix: "/", stripPrefix: false },
      prefetch: true,
      tokenMode: { mode: "prefetch", decidedBy: "token.prefetch" },
      clientAuth: "body",
      token: {
        state: "valid",
        fingerprint: fingerprint("token-one"),
        scope: "files:read files:write",
        expiresAt: new Date(NOW_WALL_MS + 540_000).toISOString(),
        secondsToExpiry: 540,
        lastFetchAt: new Date(NOW_WALL_MS - 59_000).toISOString(),
        lastFetchDurationMs: 42,
        lastError: null,
        nextRefreshAt: new Date(NOW_WALL_MS + 240_000).toISOString(),
        fetchCount: 1,
        failureCount: 0,
        sharedCacheHits: 0,
        origin: null,
      },
      requests: {
        total: 8,
        byStatusClass: { "2xx": 7, "5xx": 1 },
        inFlight: 1,
        errors: 0,
        errorsByCode: {},
        policyRefusals: 0,
        replays: 2,
      },
      rates: { requestsPerSecond: 0, errorsPerSecond: 0, requests15m: 0, errors15m: 0 },
    });
    expect(body.upstreams[1]).toMatchObject({
      name: "scripts",
      apiVersion: "scripting-preview",
      token: {
        state: "failed",
        fingerprint: null,
        secondsToExpiry: null,
        lastError: {
          code: "BP_ERR_TOKEN_REJECTED",
          message: "answered 401 (invalid_client)",
          at: new Date(NOW_WALL_MS - 1_000).toISOString(),
        },
        failureCount: 3,
      },
      requests: { total: 0, errors: 4, errorsByCode: { token_unavailable: 4 } },
    });
  });

  it("serves an HTML page to browsers under a strict CSP: same-origin script and style only", async () => {
    admin = twoUpstreams();
    const res = await admin.app.inject({
      method: "GET",
      url: "/status",
      headers: { accept: BROWSER_ACCEPT },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(res.headers["content-security-policy"]).toBe(STATUS_PAGE_CSP);
    expect(STATUS_PAGE_CSP).toContain("script-src 'self';");
    expect(STATUS_PAGE_CSP).not.toContain("unsafe");
    expect(res.headers.vary).toBe("accept");
    const html = res.body;
    expect(html).toMatch(/^<!doctype html>/);
    // No reload: the script refreshes the data in place.
    expect(html).not.toContain('http-equiv="refresh"');
    // The only script and stylesheet are the page's own files; nothing inline, nothing remote.
    expect(STATUS_SCRIPT_PATH).toMatch(/^\/status\/assets\/status-[0-9a-f]{12}\.js$/);
    expect(html.match(/<script[^>]*>/g)).toEqual([`<script src="${STATUS_SCRIPT_PATH}" defer>`]);
    expect(html).toContain(`<script src="${STATUS_SCRIPT_PATH}" defer></script>`);
    expect(html.match(/<link[^>]*>/g)).toEqual([
      `<link rel="stylesheet" href="${STATUS_STYLE_PATH}">`,
    ]);
    expect(html).not.toMatch(/style=|<style|@import|url\(|https?:\/\/(?!files|scripts)/i);
    expect(html).toContain('data-upstream="files"');
    expect(html).toContain('data-upstream="scripts"');
    expect(html).toContain("BP_ERR_TOKEN_REJECTED");

    const script = await admin.app.inject({ url: STATUS_SCRIPT_PATH });
    expect(script.statusCode).toBe(200);
    expect(script.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(script.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
    expect(script.body).toContain("/status/fragment");
    const style = await admin.app.inject({ url: STATUS_STYLE_PATH });
    expect(style.headers["content-type"]).toBe("text/css; charset=utf-8");
    // The page itself and its data are never cached.
    expect(res.headers["cache-control"]).toBe("no-store");
  });

  it("shows one upstream's detail with its fingerprint, timeline and sparklines", async () => {
    admin = twoUpstreams();
    const res = await admin.app.inject({
      url: "/status?upstream=files",
      headers: { accept: BROWSER_ACCEPT },
    });
    const html = res.body;
    expect(html).toContain('<section class="detail" data-upstream="files"');
    expect(html).toContain(fingerprint("token-one"));
    expect(html).toContain('<svg class="timeline"');
    expect(html).toContain('<svg class="spark requests"');
    expect(html).toContain('<svg class="spark errors"');
    const json = await admin.app.inject({ url: "/status/upstreams/files" });
    expect(json.json()).toMatchObject({
      name: "files",
      token: { fingerprint: fingerprint("token-one") },
      series: { bucketSeconds: 15 },
      timeline: { expiresAt: new Date(NOW_WALL_MS + 540_000).toISOString() },
    });
    expect(json.json().series.requests).toHaveLength(60);
    const missing = await admin.app.inject({ url: "/status/upstreams/nope" });
    expect(missing.statusCode).toBe(404);
  });

  it("honours ?format= over the Accept header", async () => {
    admin = buildTestAdmin();
    const html = await admin.app.inject({ method: "GET", url: "/status?format=html" });
    expect(html.headers["content-type"]).toMatch(/^text\/html/);
    const json = await admin.app.inject({
      method: "GET",
      url: "/status?format=json",
      headers: { accept: BROWSER_ACCEPT },
    });
    expect(json.headers["content-type"]).toMatch(/^application\/json/);
  });

  it("escapes hostile values in the HTML page", async () => {
    admin = buildTestAdmin({
      statuses: {
        files: failedStatus(
          "BP_ERR_TOKEN_HTTP",
          `answered 500 (<script>alert("x")</script> & <img src=x onerror=y>)`,
        ),
      },
    });
    const res = await admin.app.inject({
      method: "GET",
      url: "/status",
      headers: { accept: "text/html" },
    });
    expect(res.body).not.toContain("<script>");
    expect(res.body).not.toContain("<img");
    expect(res.body).toContain(
      "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img src=x onerror=y&gt;",
    );
  });

  it("hides credentials embedded in configured URLs", async () => {
    admin = buildTestAdmin({
      upstreams: [
        // Validation refuses such a URL; /status hides the credentials all the same.
        makeUpstreamConfig(
          "files",
          {},
          { baseUrl: "https://user:pa55word@files.example.test/api" },
        ),
      ],
    });
    const res = await admin.app.inject({ method: "GET", url: "/status" });
    expect(res.json().upstreams[0].baseUrl).toBe("https://files.example.test/api");
    expect(res.body).not.toContain("pa55word");
  });

  it("hides a token URL's query, which may carry a key", async () => {
    const files = makeUpstreamConfig("files");
    admin = buildTestAdmin({
      upstreams: [
        {
          ...files,
          token: { ...files.token, tokenUrl: "https://login.example.test/token?key=k3y-value" },
        },
      ],
    });
    const res = await admin.app.inject({ method: "GET", url: "/status" });
    expect(res.json().upstreams[0].tokenUrl).toBe("https://login.example.test/token?…");
    expect(res.body).not.toContain("k3y-value");
  });
});
