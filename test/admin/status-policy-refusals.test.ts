/**
 * Issue 32: an upstream whose only "errors" are callers refused by policy (407/403/429 from
 * `allow`, 429 from `rateLimit`) is the gateway working: /status and its page do not list it as
 * a problem, and show the refusals, the `allow` rules and the route instead.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { Denial } from "../../src/callers/denial-log.js";
import { POLICY_REFUSAL_CODES, PROXY_ERROR_STATUS } from "../../src/errors.js";
import { createRequestMetrics, type FinishedRequest } from "../../src/proxy/request-metrics.js";
import { buildTestAdmin, makeUpstreamConfig, NOW_WALL_MS, type TestAdmin } from "./helpers.js";

const HTML = { accept: "text/html" };

const DENIALS: Denial[] = [
  {
    at: new Date(NOW_WALL_MS - 2_000).toISOString(),
    upstream: "reports",
    reason: "not_allowed",
    caller: "user:intern",
  },
  {
    at: new Date(NOW_WALL_MS - 5_000).toISOString(),
    upstream: "reports",
    reason: "no_credential",
    caller: "addr:10.1.2.3",
  },
];

describe("/status: policy refusals are not problems", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  function build(): TestAdmin {
    const reports = makeUpstreamConfig("reports", {
      match: { hosts: ["reports.internal"], pathPrefix: "/v2/" },
      apiVersion: "scripting-preview",
      allow: [{ user: "reporting-cron" }, { cidr: "10.0.0.0/8" }],
    });
    const files = makeUpstreamConfig("files");
    admin = buildTestAdmin({ upstreams: [reports, files], callerDenials: () => DENIALS });
    // Through the proxy's own request accounting, as refused and failed requests finish.
    const requests = createRequestMetrics(admin.metrics);
    const finish = (upstream: string, status: number, errorCode: string) => {
      requests.started(upstream);
      requests.finished(
        {
          upstream,
          routed: true,
          method: "GET",
          status,
          replayed: false,
          errorCode,
        } as FinishedRequest,
        1,
      );
    };
    finish("reports", 403, "caller_not_allowed");
    finish("reports", 407, "caller_unauthenticated");
    finish("reports", 407, "caller_unauthenticated");
    finish("reports", 429, "rate_limited");
    finish("files", 502, "upstream_unreachable");
    return admin;
  }

  it("JSON: refusals counted apart; only the upstream with real errors is a problem", async () => {
    const body = (await build().app.inject({ url: "/status" })).json();
    expect(body.summary.problems.map((p: { name: string }) => p.name)).toEqual(["files"]);
    expect(body.summary.policyRefusals).toEqual({
      total: 4,
      byCode: { caller_not_allowed: 1, caller_unauthenticated: 2, rate_limited: 1 },
    });
    const reports = body.upstreams.find((u: { name: string }) => u.name === "reports");
    expect(reports.rates.errorsPerSecond).toBe(0);
    expect(reports.requests).toMatchObject({ errors: 4, policyRefusals: 4 });
    expect(reports.route).toEqual({
      listen: null,
      hosts: ["reports.internal:80"],
      pathPrefix: "/v2/",
      stripPrefix: false,
    });
    expect(reports.allow).toEqual(["user reporting-cron", "cidr 10.0.0.0/8"]);
  });

  it("page: not under Problems; refusals, allow rules, route and API version shown", async () => {
    const page = (await build().app.inject({ url: "/status", headers: HTML })).body;
    const problems = page.slice(page.indexOf('class="problem-list"'), page.indexOf("refusal-list"));
    expect(problems).toContain("Problems (1)");
    expect(problems).toContain(">files</a>");
    expect(problems).not.toContain("reports");

    const refusals = page.slice(page.indexOf('class="refusal-list"'));
    expect(refusals).toContain("Refused by policy (4)");
    expect(refusals).toContain("caller_not_allowed 1 · caller_unauthenticated 2 · rate_limited 1");
    expect(refusals).toContain("403 not allowed</td><td>user:intern");
    expect(refusals).toContain("407 no credential</td><td>addr:10.1.2.3");

    const row = page.slice(page.indexOf('<tr data-upstream="reports"'));
    const cells = row.slice(0, row.indexOf("</tr>"));
    expect(cells).toContain('<td class="route">reports.internal:80 /v2/</td>');
    expect(cells).toContain("<td>scripting-preview</td>");
    expect(cells).toContain("user reporting-cron, cidr 10.0.0.0/8");
    expect(cells).toContain('<td class="num refused">4</td>');
    expect(cells).not.toMatch(/class="num error"/);
  });

  it("every caller_ refusal with a 4xx status is a policy refusal, and every policy refusal is a 4xx", () => {
    const callerCodes = Object.entries(PROXY_ERROR_STATUS)
      .filter(([code, status]) => code.startsWith("caller_") && status < 500)
      .map(([code]) => code);
    for (const code of callerCodes) expect(POLICY_REFUSAL_CODES, code).toContain(code);
    for (const code of POLICY_REFUSAL_CODES) {
      expect(PROXY_ERROR_STATUS[code as keyof typeof PROXY_ERROR_STATUS], code).toBeLessThan(500);
    }
  });
});

describe("/status/upstreams/<name>", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  it("a browser gets the page with the upstream's detail open; API clients get the JSON", async () => {
    admin = buildTestAdmin({
      upstreams: [
        makeUpstreamConfig("reports", { allow: [{ user: "reporting-cron" }] }),
        makeUpstreamConfig("files"),
      ],
      callerDenials: () => DENIALS,
      monotonicNow: () => 1_000_000,
    });
    const page = await admin.app.inject({ url: "/status/upstreams/reports", headers: HTML });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.headers["content-security-policy"]).toContain("default-src 'none'");
    expect(page.headers.vary).toBe("accept");
    expect(page.body).toMatch(/^<!doctype html>/);
    expect(page.body).toContain('<section class="detail" data-upstream="reports"');
    // The form keeps the selection, so the page's refresh keeps showing this upstream.
    expect(page.body).toContain('<input type="hidden" name="upstream" value="reports">');
    const detail = page.body.slice(page.body.indexOf('<section class="detail"'));
    expect(detail).toContain('<span class="rule">user reporting-cron</span>');
    expect(detail).toContain("Recent refusals");
    expect(detail).toContain("403 not allowed</td><td>user:intern");

    const json = async (headers?: Record<string, string>) => {
      const res = await admin!.app.inject({ url: "/status/upstreams/reports", headers });
      expect(res.statusCode).toBe(200);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      return res.json();
    };
    const plain = await json();
    expect(plain).toMatchObject({ name: "reports", allow: ["user reporting-cron"] });
    expect(plain).toHaveProperty("series");
    expect(plain).toHaveProperty("timeline");
    expect(await json({ accept: "*/*" })).toEqual(plain);
    expect(await json({ accept: "application/json" })).toEqual(plain);
  });

  it("an unknown name: a 404 page for a browser, the JSON error for API clients", async () => {
    admin = buildTestAdmin();
    const page = await admin.app.inject({ url: "/status/upstreams/nope%3Cb%3E", headers: HTML });
    expect(page.statusCode).toBe(404);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.body).toContain("No upstream is named &quot;nope&lt;b&gt;&quot;.");
    const res = await admin.app.inject({ url: "/status/upstreams/nope" });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({
      error: { code: "not_found", message: "no upstream of that name" },
    });
  });
});
