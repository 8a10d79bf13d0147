/**
 * The status page of a real 10,000-upstream gateway in headless Chromium: the app is built from
 * a loaded config (one client per upstream, as scripts/many-credentials.mjs builds it) against
 * the emulator, the first tokenCache.eagerLimit credentials are prefetched, two credentials are
 * broken (one prefetched, one lazy and used), traffic goes through the proxy. The page must load
 * in under a second, show the right counts, find a failing upstream with a filter, show its
 * detail, and refresh in place without losing what was typed.
 */
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Browser, Page } from "playwright-core";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type App, buildApp } from "../../src/app/build-app.js";
import { loadConfig } from "../../src/config/load.js";
import { startEmulator } from "../../src/emulator/emulator.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import { createLogger } from "../../src/observability/logger.js";
import { createMetrics } from "../../src/observability/metrics.js";
import { launchChromium, skipWithoutChromium } from "../helpers/chromium.js";

const SCREENSHOT = resolve(".tmp/status-page-10k.png");
const COUNT = 10_000;
/** Prefetched (within the default eagerLimit of 100) with a wrong secret. */
const BROKEN_EAGER = "svc-42";
/** Lazy, wrong secret, used once: its fetch fails on first use. */
const BROKEN_LAZY = "svc-7777";
const USED = ["svc-3", "svc-5000", "svc-9999"];

const skip = skipWithoutChromium;

const secretOf = (i: number) => `secret-${i}-${"x".repeat(24)}`;

describe.skipIf(skip)("status page of a 10,000-upstream gateway in a real headless browser", () => {
  let emulator: Emulator;
  let app: App;
  let browser: Browser;
  let adminUrl: string;
  let proxyPort: number;

  beforeAll(async () => {
    emulator = await startEmulator({
      host: "127.0.0.1",
      port: 0,
      clients: Array.from({ length: COUNT }, (_, i) => ({
        clientId: `client-${i}`,
        clientSecret: secretOf(i),
      })),
    });
    const upstreams = Array.from({ length: COUNT }, (_, i) => ({
      name: `svc-${i}`,
      baseUrl: emulator.url,
      clientId: `client-${i}`,
      clientSecret: [BROKEN_EAGER, BROKEN_LAZY].includes(`svc-${i}`) ? "wrong-secret" : secretOf(i),
      tls: { caFile: emulator.caFile },
      match: { hosts: [`svc-${i}.internal`] },
    }));
    const config = await loadConfig({
      configText: JSON.stringify({
        listen: { host: "127.0.0.1", port: 0 },
        admin: { host: "127.0.0.1", port: 0 },
        upstreams,
      }),
      env: {},
    });
    app = buildApp(config, {
      logger: createLogger({ level: "silent", format: "json" }),
      metrics: createMetrics({ collectProcessMetrics: false }),
    });
    const addresses = await app.listen();
    adminUrl = `http://127.0.0.1:${addresses.admin.port}`;
    proxyPort = addresses.proxy[0]!.port;
    // The first 100 credentials are prefetched: wait until each has settled.
    const deadline = performance.now() + 60_000;
    const settled = () => {
      const statuses = app.tokens.statuses();
      for (let i = 0; i < 100; i++) {
        const state = statuses.get(`svc-${i}`)?.state;
        if (state !== "valid" && state !== "failed") return false;
      }
      return true;
    };
    while (!settled() && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const name of [...USED, BROKEN_LAZY, BROKEN_LAZY]) {
      const res = await request(`http://127.0.0.1:${proxyPort}/platform/v1/spreadsheets/x`, {
        headers: { host: `${name}.internal` },
      });
      await res.body.dump();
    }
    browser = await launchChromium();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close(0);
    await emulator?.close();
  });

  async function text(page: Page, selector: string): Promise<string> {
    return (await page.locator(selector).first().innerText()).replace(/\s+/g, " ").trim();
  }

  // The machine running the suite is shared: a load-time sample can be slowed by others, so this
  // test alone is retried; every attempt must meet the bound on its own.
  it("loads in under a second", { retry: 2, timeout: 60_000 }, async () => {
    const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
    const page = await context.newPage();
    try {
      // A warm-up load (Chromium's own start-up is not the page's), then three measured ones:
      // the browser's navigation timing (request sent to load event done), median of three,
      // because this machine is shared and one slow sample says more about it than the page.
      await page.goto(`${adminUrl}/status`);
      const samples: { wallMs: number; loadMs: number }[] = [];
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        const response = await page.goto(`${adminUrl}/status`, { waitUntil: "load" });
        const wallMs = performance.now() - started;
        expect(response?.status()).toBe(200);
        const loadMs = await page.evaluate(() => {
          const entry = (
            globalThis as unknown as {
              performance: { getEntriesByType(t: string): { loadEventEnd: number }[] };
            }
          ).performance.getEntriesByType("navigation")[0];
          return entry?.loadEventEnd ?? Number.NaN;
        });
        samples.push({ wallMs, loadMs });
      }
      const median = [...samples].sort((a, b) => a.loadMs - b.loadMs)[1]!;
      console.log(
        `status page, ${COUNT} upstreams: load ${samples.map((s) => `${s.loadMs.toFixed(0)} ms`).join(", ")} (navigation timing; as seen by the test ${samples.map((s) => `${s.wallMs.toFixed(0)} ms`).join(", ")})`,
      );
      expect(median.loadMs).toBeLessThan(1_000);
    } finally {
      await context.close();
    }
  });

  it("shows the right summary, finds a failing upstream, shows its detail, refreshes in place", async () => {
    const expected = (await (await request(`${adminUrl}/status`)).body.json()) as {
      summary: { upstreams: number; byState: Record<string, number> };
    };
    expect(expected.summary.upstreams).toBe(COUNT);
    expect(expected.summary.byState.failed).toBe(2);
    // 99 prefetched (svc-42 failed), plus the two used lazy ones (svc-3 was prefetched).
    expect(expected.summary.byState.valid).toBe(99 + 2);

    const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
    const page = await context.newPage();
    const consoleErrors: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") consoleErrors.push(m.text());
    });
    const requested: string[] = [];
    page.on("request", (r) => requested.push(r.url()));
    let loads = 0;
    page.on("load", () => loads++);
    try {
      await page.goto(`${adminUrl}/status`);
      expect(loads).toBe(1);

      // Summary counts, as the JSON has them.
      expect(await text(page, "#upstream-count")).toBe(String(COUNT));
      for (const [state, count] of Object.entries(expected.summary.byState)) {
        expect(await text(page, `[data-count="${state}"]`)).toBe(String(count));
      }
      // Problems first: both broken credentials lead the list and the summary.
      const firstRows = await page
        .locator("tbody tr")
        .evaluateAll((rows) =>
          rows
            .slice(0, 2)
            .map((r) => (r as unknown as { dataset: { upstream: string } }).dataset.upstream),
        );
      expect(firstRows.sort()).toEqual([BROKEN_EAGER, BROKEN_LAZY].sort());
      expect(await text(page, ".problem-list")).toContain(BROKEN_LAZY);
      expect(await page.locator("tbody tr").count()).toBe(50);

      // Search: type the lazy broken upstream's name; the list narrows in place.
      const search = page.locator('input[name="q"]');
      await search.fill(BROKEN_LAZY);
      await page.waitForFunction(
        (name) => {
          const doc = (
            globalThis as unknown as {
              document: {
                querySelectorAll(s: string): {
                  length: number;
                  [i: number]: { getAttribute(a: string): string | null };
                };
              };
            }
          ).document;
          const rows = doc.querySelectorAll("tbody tr");
          return rows.length === 1 && rows[0]!.getAttribute("data-upstream") === name;
        },
        BROKEN_LAZY,
        { timeout: 10_000 },
      );
      expect(await text(page, "#match-count")).toBe("1");
      expect(await text(page, `tr[data-upstream="${BROKEN_LAZY}"]`)).toContain("failed");

      // Filter by state instead: both failing upstreams, nothing else.
      await search.fill("");
      await page.selectOption('select[name="state"]', "failed");
      await page.waitForFunction(
        () =>
          (
            globalThis as unknown as {
              document: { querySelectorAll(s: string): { length: number } };
            }
          ).document.querySelectorAll("tbody tr").length === 2,
        undefined,
        { timeout: 10_000 },
      );

      // Detail view: token timeline (no token), sparklines with the failed requests.
      await page.locator(`tr[data-upstream="${BROKEN_LAZY}"] a`).click();
      await page.locator(`section.detail[data-upstream="${BROKEN_LAZY}"]`).waitFor();
      const detail = await text(page, "section.detail");
      expect(detail).toContain("lazy (beyond tokenCache.eagerLimit; fetched on first request)");
      expect(detail).toContain("No token");
      expect(await page.locator("section.detail svg.spark.errors").count()).toBe(1);
      expect(page.url()).toContain(`upstream=${BROKEN_LAZY}`);

      // A healthy prefetched one: its timeline is drawn.
      await search.fill(USED[0]!);
      await page.selectOption('select[name="state"]', "");
      await page.locator(`tr[data-upstream="${USED[0]}"] a`).click();
      await page.locator(`section.detail[data-upstream="${USED[0]}"] svg.timeline`).waitFor();
      expect(await text(page, "section.detail")).toContain(
        "prefetch (within tokenCache.eagerLimit)",
      );

      mkdirSync(dirname(SCREENSHOT), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });

      // In-place refresh: the data comes again, the page is not reloaded, the typed text stays.
      const refreshesBefore = Number(
        (await page.locator("body").getAttribute("data-refreshes")) ?? 0,
      );
      await page.waitForFunction(
        (before) =>
          Number(
            (globalThis as unknown as { document: { body: { dataset: { refreshes?: string } } } })
              .document.body.dataset.refreshes ?? 0,
          ) > before,
        refreshesBefore,
        { timeout: 15_000 },
      );
      expect(await search.inputValue()).toBe(USED[0]);
      expect(loads).toBe(1);

      // Same-origin only, and the CSP blocked nothing.
      expect(requested.every((url) => url.startsWith(adminUrl))).toBe(true);
      expect(consoleErrors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);

  it("answers the JSON with filters and paging, and a small /readyz", async () => {
    const started = performance.now();
    const res = await request(`${adminUrl}/status?state=failing&limit=10`);
    const body = (await res.body.json()) as {
      page: { total: number; returned: number };
      upstreams: { name: string }[];
    };
    const ms = performance.now() - started;
    console.log(`/status?state=failing on ${COUNT} upstreams: ${ms.toFixed(0)} ms`);
    expect(body.page).toMatchObject({ total: 2, returned: 2 });
    expect(body.upstreams.map((u) => u.name).sort()).toEqual([BROKEN_LAZY, BROKEN_EAGER].sort());
    const readyz = await request(`${adminUrl}/readyz`);
    const readyBody = await readyz.body.text();
    expect(readyz.statusCode).toBe(200);
    expect(readyBody.length).toBeLessThan(5_000);
  });
});
