import { existsSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fingerprint } from "../../src/base/fingerprint.js";
import { launchChromium, skipWithoutChromium } from "../helpers/chromium.js";
import {
  buildTestAdmin,
  failedStatus,
  idleStatus,
  makeUpstreamConfig,
  type TestAdmin,
  validStatus,
} from "./helpers.js";

const SCREENSHOT = resolve(".tmp/status-page.png");
const CLIENT_SECRET = "browser-test-client-secret-5e2a";
const TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJicm93c2VyIn0.browser-token-b71c";

const skip = skipWithoutChromium;

/**
 * Time for steps that wait on Chromium (starting it, closing it, a test's navigations): vitest's
 * 30 s default was too little on a loaded CI machine. Nothing here measures time, so a generous
 * budget only changes how long a broken page takes to fail.
 */
const BROWSER_HOOK_MS = 120_000;
const BROWSER_TEST_MS = 90_000;
/**
 * Waiting for the page's script to swap in new data (200 ms after typing, or at its refresh
 * every 5 s): six refresh periods. A page that never swaps it in still fails.
 */
const REFRESH_WAIT_MS = 30_000;

/** What a person sees: rendered text (innerText), not the DOM's textContent. */
function visibleText(locator: Locator): Promise<string> {
  return locator.innerText();
}

/** Visible text of an upstream's row in the list, whitespace collapsed. */
async function rowOf(page: Page, upstream: string): Promise<string> {
  const text = await visibleText(page.locator(`tr[data-upstream="${upstream}"]`));
  return text.replace(/\s+/g, " ").trim();
}

describe.skipIf(skip)("status page in a real headless browser", () => {
  let admin: TestAdmin;
  let browser: Browser;
  let url: string;

  beforeAll(async () => {
    const files = makeUpstreamConfig("files", { baseUrl: "https://api.example.test" });
    const scripts = makeUpstreamConfig("scripts", {
      baseUrl: "https://api.example.test",
      apiVersion: "scripting-preview",
    });
    const reports = makeUpstreamConfig("reports", { baseUrl: "https://reports.example.test" });
    const withSecret = (u: typeof files) => ({
      ...u,
      token: { ...u.token, clientSecret: { kind: "inline" as const, value: CLIENT_SECRET } },
    });
    admin = buildTestAdmin({
      upstreams: [
        withSecret(files),
        withSecret({
          ...scripts,
          token: { ...scripts.token, tokenUrl: "https://api.example.test/oauth2/token" },
        }),
        withSecret({ ...reports, tokenPolicy: { ...reports.tokenPolicy, prefetch: false } }),
      ],
      statuses: {
        files: validStatus(TOKEN),
        scripts: failedStatus(
          "BP_ERR_TOKEN_REJECTED",
          "token endpoint https://api.example.test/oauth2/token answered 401 (invalid_client: client authentication failed)",
        ),
        reports: idleStatus(),
      },
    });
    admin.metrics.requestsTotal.inc(
      { upstream: "files", method: "GET", status_class: "2xx" },
      1289,
    );
    admin.metrics.requestsTotal.inc({ upstream: "files", method: "POST", status_class: "4xx" }, 7);
    admin.metrics.replaysTotal.inc({ upstream: "files" }, 3);
    admin.metrics.errorsTotal.inc({ upstream: "scripts", code: "token_unavailable" }, 12);
    url = `${await admin.app.listen({ host: "127.0.0.1", port: 0 })}/status`;
    browser = await launchChromium();
  }, BROWSER_HOOK_MS);

  afterAll(async () => {
    await browser?.close();
    await admin?.app.close();
  }, BROWSER_HOOK_MS);

  it("shows each upstream with its state and fingerprint, and no secret or token", {
    timeout: BROWSER_TEST_MS,
  }, async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    const blocked: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error") blocked.push(message.text());
    });
    const requested: string[] = [];
    page.on("request", (request) => requested.push(request.url()));
    try {
      const response = await page.goto(url);
      expect(response?.status()).toBe(200);
      expect(await page.title()).toBe("bearer-proxy status");

      const rows = page.locator("tr[data-upstream]");
      expect(await rows.count()).toBe(3);
      // Problems first: the failing upstream leads the list and the summary.
      expect(await rows.first().getAttribute("data-upstream")).toBe("scripts");
      expect(await rowOf(page, "scripts")).toMatch(/^scripts failed prefetch/);
      expect(await rowOf(page, "files")).toMatch(/^files valid prefetch/);
      expect(await visibleText(page.locator(".problem-list"))).toContain(
        "invalid_client: client authentication failed",
      );
      // The failed badge is red, the valid one green: colour carries the state at a glance.
      const colour = (row: Locator) =>
        row.locator(".badge").evaluate((el) => {
          // Runs in the page; the test's TypeScript has no DOM lib, hence the narrow type.
          const view = globalThis as unknown as {
            getComputedStyle(e: unknown): { backgroundColor: string };
          };
          return view.getComputedStyle(el).backgroundColor;
        });
      expect(await colour(page.locator('tr[data-upstream="files"]'))).toBe("rgb(26, 127, 55)");
      expect(await colour(page.locator('tr[data-upstream="scripts"]'))).toBe("rgb(207, 34, 46)");

      // The detail of one upstream, opened in place.
      await page.locator('tr[data-upstream="files"] a').click();
      const files = page.locator('section.detail[data-upstream="files"]');
      await files.waitFor();
      const filesText = await visibleText(files);
      expect(filesText).toContain(fingerprint(TOKEN));
      expect(filesText).toContain("1296 total (2xx: 1289, 4xx: 7)");
      expect(filesText).toContain("https://api.example.test/iam/v1/oauth2/token");
      expect(await files.locator("svg.timeline").count()).toBe(1);

      await page.locator('tr[data-upstream="reports"] a').click();
      const reports = page.locator('section.detail[data-upstream="reports"]');
      await reports.waitFor();
      expect(await visibleText(reports)).toContain("lazy (fetched on first request)");

      const text = await visibleText(page.locator("body"));
      const html = await page.content();
      for (const secret of [CLIENT_SECRET, TOKEN]) {
        expect(text).not.toContain(secret);
        expect(html).not.toContain(secret);
      }
      // Self-contained: the page loads only itself, its own script and stylesheet, and its
      // data fragments; the CSP blocked nothing.
      const origin = new URL(url).origin;
      expect(requested.every((r) => r.startsWith(`${origin}/status`))).toBe(true);
      expect(requested.some((r) => r.includes("/status/assets/status-"))).toBe(true);
      expect(blocked).toEqual([]);

      mkdirSync(dirname(SCREENSHOT), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      expect(existsSync(SCREENSHOT)).toBe(true);
    } finally {
      await context.close();
    }
  });

  it("refreshes its data in place, keeping what the operator typed", {
    timeout: BROWSER_TEST_MS,
  }, async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    let loads = 0;
    page.on("load", () => loads++);
    try {
      await page.goto(url);
      expect(await rowOf(page, "files")).toMatch(/^files valid/);
      await page.locator('input[name="q"]').fill("fil");
      await page.waitForFunction(
        () =>
          (
            globalThis as unknown as {
              document: { querySelectorAll(s: string): { length: number } };
            }
          ).document.querySelectorAll("tr[data-upstream]").length === 1,
        undefined,
        { timeout: REFRESH_WAIT_MS },
      );
      admin.statuses.set("files", failedStatus("BP_ERR_TOKEN_NETWORK", "connect ECONNREFUSED"));
      // The script fetches the data every 5 s and swaps it in; no navigation happens.
      await page.waitForFunction(
        () =>
          (
            globalThis as unknown as {
              document: { querySelector(s: string): { textContent: string } | null };
            }
          ).document
            .querySelector('tr[data-upstream="files"]')
            ?.textContent.includes("failed") === true,
        undefined,
        { timeout: REFRESH_WAIT_MS },
      );
      expect(await rowOf(page, "files")).toMatch(/^files failed/);
      expect(await page.locator('input[name="q"]').inputValue()).toBe("fil");
      expect(loads).toBe(1);
    } finally {
      admin.statuses.set("files", validStatus(TOKEN));
      await context.close();
    }
  });
});
