/**
 * Issue 32, in a real headless browser: callers refused by policy are shown as the gateway
 * working (not under Problems, not red), with each upstream's route, API version, `allow` rules
 * and recent refusals; `/status/upstreams/<name>` opens the page on that upstream (and stays on
 * it as the page refreshes); the token's source (shared cache or token endpoint) is shown.
 */
import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Denial } from "../../src/callers/denial-log.js";
import { createRequestMetrics, type FinishedRequest } from "../../src/proxy/request-metrics.js";
import { launchChromium, skipWithoutChromium } from "../helpers/chromium.js";
import {
  buildTestAdmin,
  makeUpstreamConfig,
  NOW_WALL_MS,
  type TestAdmin,
  validStatus,
} from "./helpers.js";

const SCREENSHOT = resolve(".tmp/status-page-refusals.png");
const CLIENT_SECRET = "refusals-browser-client-secret-93d1";
const TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJyZWZ1c2FscyJ9.refusals-token-5a0e";
const SHARED_TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzaGFyZWQifQ.shared-token-c3f7";

const DENIALS: Denial[] = [
  {
    at: new Date(NOW_WALL_MS - 2_000).toISOString(),
    upstream: "reports",
    reason: "not_allowed",
    caller: "user:intern",
  },
  {
    at: new Date(NOW_WALL_MS - 4_000).toISOString(),
    upstream: "reports",
    reason: "no_credential",
    caller: "addr:10.1.2.3",
  },
];

/**
 * Time for steps that wait on Chromium (starting it, closing it, a test's navigations): vitest's
 * 30 s default was too little on a loaded CI machine. Nothing here measures time, so a generous
 * budget only changes how long a broken page takes to fail.
 */
const BROWSER_HOOK_MS = 120_000;
const BROWSER_TEST_MS = 90_000;
/** Waiting for the page's in-place refresh (every 5 s): six of its periods. */
const REFRESH_WAIT_MS = 30_000;

/** Rendered text, whitespace collapsed. */
async function textOf(locator: Locator): Promise<string> {
  return (await locator.innerText()).replace(/\s+/g, " ").trim();
}

/** The computed text colour of the first element `locator` matches. */
function colourOf(locator: Locator): Promise<string> {
  return locator.first().evaluate((el) => {
    // Runs in the page; the test's TypeScript has no DOM lib, hence the narrow type.
    const view = globalThis as unknown as { getComputedStyle(e: unknown): { color: string } };
    return view.getComputedStyle(el).color;
  });
}

describe.skipIf(skipWithoutChromium)(
  "status page: policy refusals and token source in a browser",
  () => {
    let admin: TestAdmin;
    let browser: Browser;
    let origin: string;

    beforeAll(async () => {
      const withSecret = (u: ReturnType<typeof makeUpstreamConfig>) => ({
        ...u,
        token: { ...u.token, clientSecret: { kind: "inline" as const, value: CLIENT_SECRET } },
      });
      admin = buildTestAdmin({
        upstreams: [
          withSecret(
            makeUpstreamConfig("reports", {
              match: { hosts: ["reports.internal"], pathPrefix: "/v2/" },
              apiVersion: "scripting-preview",
              allow: [{ user: "reporting-cron" }, { cidr: "10.0.0.0/8" }],
            }),
          ),
          withSecret(makeUpstreamConfig("sheets")),
        ],
        statuses: {
          reports: validStatus(TOKEN),
          sheets: validStatus(SHARED_TOKEN, {
            fetchCount: 0,
            sharedCacheHits: 1,
            origin: {
              source: "shared-cache",
              receivedAtWallMs: NOW_WALL_MS - 59_000,
              issuedAtWallMs: NOW_WALL_MS - 61_500,
            },
          }),
        },
        sharedCacheState: () => "up",
        callerDenials: () => DENIALS,
      });
      const requests = createRequestMetrics(admin.metrics);
      const finish = (status: number, errorCode: string) => {
        requests.started("reports");
        requests.finished(
          {
            upstream: "reports",
            routed: true,
            method: "GET",
            status,
            replayed: false,
            errorCode,
          } as FinishedRequest,
          1,
        );
      };
      finish(403, "caller_not_allowed");
      finish(407, "caller_unauthenticated");
      finish(407, "caller_unauthenticated");
      finish(429, "rate_limited");
      origin = await admin.app.listen({ host: "127.0.0.1", port: 0 });
      browser = await launchChromium();
    }, BROWSER_HOOK_MS);

    afterAll(async () => {
      await browser?.close();
      await admin?.app.close();
    }, BROWSER_HOOK_MS);

    async function open(path: string): Promise<{ page: Page; close: () => Promise<void> }> {
      const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
      const page = await context.newPage();
      const response = await page.goto(`${origin}${path}`);
      expect(response?.status()).toBe(200);
      expect(response?.headers()["content-type"]).toBe("text/html; charset=utf-8");
      return { page, close: () => context.close() };
    }

    it("shows refusals apart from problems, with route, API version and allow rules", {
      timeout: BROWSER_TEST_MS,
    }, async () => {
      const { page, close } = await open("/status");
      try {
        expect(await textOf(page.locator(".problem-list"))).toContain("Problems (0)");
        const refusals = await textOf(page.locator(".refusal-list"));
        expect(refusals).toContain("Refused by policy (4)");
        expect(refusals).toContain(
          "caller_not_allowed 1 · caller_unauthenticated 2 · rate_limited 1",
        );
        expect(refusals).toContain("reports 403 not allowed user:intern");
        expect(refusals).toContain("reports 407 no credential addr:10.1.2.3");

        const row = await textOf(page.locator('tr[data-upstream="reports"]'));
        expect(row).toMatch(
          /^reports valid prefetch reports\.internal:80 \/v2\/ scripting-preview user reporting-cron, cidr 10\.0\.0\.0\/8 /,
        );
        // The refusal count is neutral grey, not the errors' red.
        const refused = page.locator('tr[data-upstream="reports"] td.refused');
        expect(await refused.innerText()).toBe("4");
        expect(await colourOf(refused)).toBe("rgb(87, 96, 106)");

        await page.locator('tr[data-upstream="reports"] a').click();
        const detail = page.locator('section.detail[data-upstream="reports"]');
        await detail.waitFor();
        const text = await textOf(detail);
        expect(text).toContain("Allow user reporting-cron cidr 10.0.0.0/8");
        expect(text).toContain("Proxy errors 0");
        expect(text).toContain(
          "Refused by policy 4 (caller_not_allowed 1 · caller_unauthenticated 2 · rate_limited 1)",
        );
        expect(text).toMatch(/recent refusals/i);
        expect(text).toContain("403 not allowed user:intern");

        mkdirSync(dirname(SCREENSHOT), { recursive: true });
        await page.screenshot({ path: SCREENSHOT, fullPage: true });
      } finally {
        await close();
      }
    });

    it("/status/upstreams/<name> opens the page on that upstream, which stays open as it refreshes", {
      timeout: BROWSER_TEST_MS,
    }, async () => {
      const { page, close } = await open("/status/upstreams/sheets");
      try {
        const detail = page.locator('section.detail[data-upstream="sheets"]');
        const text = await textOf(detail);
        expect(text).toContain(
          "Token source shared Redis cache, read at 2026-10-01T11:59:01.000Z (issued at 2026-10-01T11:58:58.500Z to the replica that asked)",
        );
        expect(text).toContain("Token endpoint requests / failures 0 / 0");
        expect(text).toContain("Taken from the shared cache 1");

        // The in-place refresh (every 5 s) keeps this upstream selected.
        await page.waitForFunction(
          () =>
            Number(
              (globalThis as unknown as { document: { body: { dataset: { refreshes?: string } } } })
                .document.body.dataset.refreshes ?? "0",
            ) >= 1,
          undefined,
          { timeout: REFRESH_WAIT_MS },
        );
        expect(await page.locator('section.detail[data-upstream="sheets"]').count()).toBe(1);

        const html = await page.content();
        const visible = await page.locator("body").innerText();
        for (const secret of [CLIENT_SECRET, TOKEN, SHARED_TOKEN]) {
          expect(html).not.toContain(secret);
          expect(visible).not.toContain(secret);
        }
      } finally {
        await close();
      }
    });
  },
);
