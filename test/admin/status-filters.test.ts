/**
 * /status JSON: filters (q, state, mode), sort, paging and the summary block counted over every
 * upstream, not just the page; bad parameters are a precise 400; never a secret.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { UpstreamConfig } from "../../src/config/proxy-config.js";
import type { TokenStatus } from "../../src/token/token-provider.js";
import {
  buildTestAdmin,
  failedStatus,
  idleStatus,
  makeUpstreamConfig,
  type TestAdmin,
  validStatus,
} from "./helpers.js";

const SECRET = "filters-test-client-secret-93c1";

/** 30 upstreams: svc-0…svc-29 on two base URLs; 3 failed, 2 degraded, 9 idle (lazy), 16 valid. */
function thirty(): { upstreams: UpstreamConfig[]; statuses: Record<string, TokenStatus> } {
  const upstreams: UpstreamConfig[] = [];
  const statuses: Record<string, TokenStatus> = {};
  for (let i = 0; i < 30; i++) {
    const u = makeUpstreamConfig(`svc-${i}`, {
      baseUrl: i % 2 === 0 ? "https://even.example.test" : "https://odd.example.test",
      clientSecret: SECRET,
    });
    upstreams.push(u);
    if ([4, 17, 23].includes(i)) {
      statuses[u.name] = failedStatus("BP_ERR_TOKEN_REJECTED", `answered 401 for ${SECRET}`);
    } else if ([8, 9].includes(i)) {
      statuses[u.name] = validStatus(`t${i}`, {
        state: "degraded",
        lastError: { code: "BP_ERR_TOKEN_HTTP", message: "answered 500", atWallMs: 1 },
      });
    } else if (i >= 20) {
      statuses[u.name] = idleStatus();
    } else {
      statuses[u.name] = validStatus(`t${i}`);
    }
  }
  return { upstreams, statuses };
}

describe("GET /status filters, paging and summary", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  function build(): TestAdmin {
    const { upstreams, statuses } = thirty();
    return buildTestAdmin({
      upstreams,
      statuses,
      tokenModes: Object.fromEntries(
        upstreams.map((u, i) => [
          u.name,
          i < 20
            ? { mode: "prefetch", decidedBy: "eagerLimit" }
            : { mode: "lazy", decidedBy: "eagerLimit" },
        ]),
      ),
    });
  }

  const names = (body: { upstreams: { name: string }[] }) => body.upstreams.map((u) => u.name);
  const get = async (url: string) => {
    const res = await admin!.app.inject({ url });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).not.toContain(SECRET);
    return res.json();
  };

  it("counts every upstream in the summary, whatever the filter and page", async () => {
    admin = build();
    const body = await get("/status?limit=5&state=valid");
    expect(body.summary).toMatchObject({
      upstreams: 30,
      byState: { failed: 3, degraded: 2, fetching: 0, valid: 16, idle: 9, closed: 0 },
      byMode: { prefetch: 20, lazy: 10 },
      problemCount: 5,
    });
    expect(body.summary.problems.map((p: { name: string }) => p.name)).toEqual([
      "svc-4",
      "svc-17",
      "svc-23",
      "svc-8",
      "svc-9",
    ]);
    expect(body.summary.problems[0].lastError).toEqual({
      code: "BP_ERR_TOKEN_REJECTED",
      message: "answered 401 for [redacted]",
    });
    expect(body.summary.series.requests).toHaveLength(60);
    expect(body.page).toEqual({
      q: "",
      state: "valid",
      mode: "",
      sort: "config",
      offset: 0,
      limit: 5,
      total: 16,
      returned: 5,
    });
    expect(names(body)).toEqual(["svc-0", "svc-1", "svc-2", "svc-3", "svc-5"]);
  });

  it("filters by state (failing = failed or degraded), name, base URL and mode", async () => {
    admin = build();
    expect(names(await get("/status?state=failing"))).toEqual([
      "svc-4",
      "svc-8",
      "svc-9",
      "svc-17",
      "svc-23",
    ]);
    expect(names(await get("/status?state=failed,idle&limit=3"))).toEqual([
      "svc-4",
      "svc-17",
      "svc-20",
    ]);
    expect(names(await get("/status?q=SVC-2"))).toEqual([
      "svc-2",
      ...Array.from({ length: 10 }, (_, i) => `svc-${20 + i}`),
    ]);
    const odd = await get("/status?q=odd.example&state=failing");
    expect(names(odd)).toEqual(["svc-9", "svc-17", "svc-23"]);
    expect((await get("/status?mode=lazy")).page.total).toBe(10);
    expect((await get("/status?q=nothing-like-this")).upstreams).toEqual([]);
  });

  it("pages with limit and offset, and sorts problems first on request", async () => {
    admin = build();
    const second = await get("/status?limit=10&offset=10");
    expect(names(second)).toEqual(Array.from({ length: 10 }, (_, i) => `svc-${10 + i}`));
    expect(second.page).toMatchObject({ offset: 10, limit: 10, total: 30, returned: 10 });
    const beyond = await get("/status?offset=100");
    expect(beyond.page).toMatchObject({ total: 30, returned: 0 });
    expect(names(await get("/status?sort=problems&limit=6"))).toEqual([
      "svc-4",
      "svc-17",
      "svc-23",
      "svc-8",
      "svc-9",
      "svc-0",
    ]);
    expect(names(await get("/status?sort=name&limit=4"))).toEqual([
      "svc-0",
      "svc-1",
      "svc-10",
      "svc-11",
    ]);
    // The default page is bounded.
    expect((await get("/status")).page.limit).toBe(100);
  });

  it("shows each upstream's real token mode", async () => {
    admin = build();
    const body = await get("/status?q=svc-2&limit=2");
    expect(body.upstreams[0]).toMatchObject({
      name: "svc-2",
      prefetch: true,
      tokenMode: { mode: "prefetch", decidedBy: "eagerLimit" },
    });
    expect(body.upstreams[1]).toMatchObject({
      name: "svc-20",
      prefetch: false,
      tokenMode: { mode: "lazy", decidedBy: "eagerLimit" },
    });
  });

  it("answers 400 with the parameter and the choices for bad values", async () => {
    admin = build();
    const cases: [string, RegExp][] = [
      ["/status?state=broken", /^state: expected failing, failed, degraded.*found "broken"$/],
      ["/status?limit=0", /^limit: expected a whole number from 1 to 1000, found "0"$/],
      ["/status?limit=abc", /^limit: expected a whole number/],
      ["/status?offset=-1", /^offset: expected a whole number/],
      ["/status?sort=random", /^sort: expected one of config, name, problems/],
      ["/status?mode=eager", /^mode: expected prefetch or lazy/],
      ["/status?q=a&q=b", /^q: give it once$/],
    ];
    for (const [url, message] of cases) {
      const res = await admin.app.inject({ url });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error.code).toBe("bad_request");
      expect(res.json().error.message, url).toMatch(message);
    }
  });

  it("feeds the rates from the ring buffer into the summary and each upstream", async () => {
    let now = 1_000_000;
    const { upstreams, statuses } = thirty();
    admin = buildTestAdmin({ upstreams, statuses, monotonicNow: () => now });
    const rates = admin.metrics.requestRates;
    for (let i = 0; i < 30; i++) rates.record("svc-3", i % 10 === 0, now - 20_000);
    now += 1_000;
    const body = await get("/status?q=svc-3&limit=1");
    expect(body.summary.requests).toMatchObject({ requests15m: 30, errors15m: 3 });
    expect(body.upstreams[0].rates).toMatchObject({ requests15m: 30, errors15m: 3 });
    expect(body.upstreams[0].rates.requestsPerSecond).toBeGreaterThan(0);
    const problems = await get("/status?sort=problems&limit=6");
    // Recent errors make a healthy-token upstream a problem too, after the token failures.
    expect(problems.summary.problems.map((p: { name: string }) => p.name)).toContain("svc-3");
  });
});
