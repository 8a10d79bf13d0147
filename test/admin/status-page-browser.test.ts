import { existsSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { type Browser, chromium, type Locator, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fingerprint } from "../../src/token/fingerprint.js";
import {
  buildTestAdmin,
  failedStatus,
  idleStatus,
  makeUpstreamConfig,
  type TestAdmin,
  validStatus,
} from "./helpers.js";

const CHROMIUM = "/usr/bin/chromium";
const SCREENSHOT = resolve(".tmp/status-page.png");
const CLIENT_SECRET = "browser-test-client-secret-5e2a";
const TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJicm93c2VyIn0.browser-token-b71c";

// Locally the test needs Debian's chromium; in CI (.ci/run installs it) it must never be skipped.
const skip = !existsSync(CHROMIUM) && !process.env.CI;

/** What a person sees: rendered text (innerText), not the DOM's textContent. */
function visibleText(locator: Locator): Promise<string> {
  return locator.innerText();
}

/** Visible text of an upstream's heading (name and state badge), whitespace collapsed. */
async function headingOf(page: Page, upstream: string): Promise<string> {
  const text = await visibleText(page.locator(`section[data-upstream="${upstream}"] h2`));
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
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
  });

  afterAll(async () => {
    await browser?.close();
    await admin?.app.close();
  });

  it("shows each upstream with its state and fingerprint, and no secret or token", async () => {
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

      const sections = page.locator("section[data-upstream]");
      expect(await sections.count()).toBe(3);
      const files = page.locator('section[data-upstream="files"]');
      expect(await headingOf(page, "files")).toBe("files valid");
      const filesText = await visibleText(files);
      expect(filesText).toContain(fingerprint(TOKEN));
      expect(filesText).toContain("1296 total (2xx: 1289, 4xx: 7)");
      expect(filesText).toContain("https://api.example.test/iam/v1/oauth2/token");

      const scripts = page.locator('section[data-upstream="scripts"]');
      expect(await headingOf(page, "scripts")).toBe("scripts failed");
      expect(await visibleText(scripts)).toContain("invalid_client: client authentication failed");
      // The failed badge is red, the valid one green: colour carries the state at a glance.
      const colour = (section: typeof files) =>
        section.locator("h2 .badge").evaluate((el) => {
          // Runs in the page; the test's TypeScript has no DOM lib, hence the narrow type.
          const view = globalThis as unknown as {
            getComputedStyle(e: unknown): { backgroundColor: string };
          };
          return view.getComputedStyle(el).backgroundColor;
        });
      expect(await colour(files)).toBe("rgb(26, 127, 55)");
      expect(await colour(scripts)).toBe("rgb(207, 34, 46)");

      const reports = page.locator('section[data-upstream="reports"]');
      expect(await headingOf(page, "reports")).toBe("reports idle");
      expect(await visibleText(reports)).toContain("lazy (fetched on first request)");

      const text = await visibleText(page.locator("body"));
      const html = await page.content();
      for (const secret of [CLIENT_SECRET, TOKEN]) {
        expect(text).not.toContain(secret);
        expect(html).not.toContain(secret);
      }
      // Self-contained: the page loads nothing but itself, and the CSP blocked nothing.
      expect(requested).toEqual([url]);
      expect(blocked).toEqual([]);

      mkdirSync(dirname(SCREENSHOT), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      expect(existsSync(SCREENSHOT)).toBe(true);
    } finally {
      await context.close();
    }
  });

  it("reloads itself to pick up state changes", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    try {
      await page.goto(url);
      expect(await headingOf(page, "files")).toBe("files valid");
      admin.statuses.set("files", failedStatus("BP_ERR_TOKEN_NETWORK", "connect ECONNREFUSED"));
      // The meta refresh fires after 5 s; wait for the navigation it causes.
      await page.waitForEvent("load", { timeout: 10_000 });
      expect(await headingOf(page, "files")).toBe("files failed");
    } finally {
      admin.statuses.set("files", validStatus(TOKEN));
      await context.close();
    }
  });
});
