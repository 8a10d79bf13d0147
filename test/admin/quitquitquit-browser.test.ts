import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, skipWithoutChromium } from "../helpers/chromium.js";
import { buildTestAdmin, type TestAdmin } from "./helpers.js";

const skip = skipWithoutChromium;

describe.skipIf(skip)("/quitquitquit against a hostile page in a real browser", () => {
  let admin: TestAdmin;
  let page: Server;
  let browser: Browser;
  let adminOrigin: string;
  let pageOrigin: string;

  beforeAll(async () => {
    admin = buildTestAdmin();
    adminOrigin = await admin.app.listen({ host: "127.0.0.1", port: 0 });
    const target = `${adminOrigin}/quitquitquit`;
    const html = `<!doctype html><title>evil</title>
<iframe name="sink"></iframe>
<form id="f" method="POST" action="${target}" target="sink" enctype="text/plain">
  <input name='{"a":"' value='"}'>
</form>
<script>
  document.getElementById("f").submit();
  // The form's answer has arrived once the frame holds the admin origin's page (cross-origin).
  const formAnswered = new Promise((resolve) => {
    const poll = () => {
      try { void frames.sink.document; setTimeout(poll, 10); } catch (error) {
        if (error.name === "SecurityError") resolve(); else setTimeout(poll, 10);
      }
    };
    poll();
  });
  Promise.allSettled([
    formAnswered,
    fetch(${JSON.stringify(target)}, { method: "POST", mode: "no-cors", body: "{}" }),
    fetch(${JSON.stringify(target)}, {
      method: "POST", headers: { "content-type": "application/json" }, body: "{}",
    }),
    fetch(${JSON.stringify(target)}, {
      method: "POST", mode: "no-cors", headers: { "x-requested-with": "XMLHttpRequest" },
    }),
  ]).then(() => { document.title = "done"; });
</script>`;
    page = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(html);
    });
    await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve));
    pageOrigin = `http://127.0.0.1:${(page.address() as AddressInfo).port}`;
    browser = await launchChromium();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await admin?.app.close();
    await new Promise<void>((resolve) => (page ? page.close(() => resolve()) : resolve()));
  }, 120_000);

  it("a form, a no-cors fetch and a JSON fetch from another origin all fail to stop the proxy", async () => {
    const context = await browser.newContext();
    const tab = await context.newPage();
    try {
      await tab.goto(pageOrigin);
      await tab.waitForFunction('document.title === "done"', undefined, { timeout: 20_000 });
    } finally {
      await context.close();
    }
    const refused = admin.logLines.filter((l) => l.includes("refused /quitquitquit"));
    // The form and both no-cors fetches reached the endpoint (the JSON fetch stops at its
    // preflight, which gets no CORS grant); each was refused.
    expect(refused.length).toBeGreaterThanOrEqual(3);
    expect(refused.every((l) => l.includes('"origin":"http://127.0.0.1:'))).toBe(true);
    expect(admin.quitCalls()).toBe(0);
  }, 60_000);
});
