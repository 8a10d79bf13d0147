/** /status shows the Redis shared token cache's state when one is configured, and nothing otherwise. */
import { afterEach, describe, expect, it } from "vitest";
import { buildTestAdmin, type TestAdmin } from "./helpers.js";

describe("GET /status: shared token cache", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  it("reports the Redis cache state in JSON and on the page, following it as it changes", async () => {
    let state = "connecting";
    admin = buildTestAdmin({ sharedCacheState: () => state });
    const json = async () => (await admin!.app.inject({ url: "/status" })).json();
    expect((await json()).sharedTokenCache).toEqual({ kind: "redis", state: "connecting" });
    state = "down";
    expect((await json()).sharedTokenCache).toEqual({ kind: "redis", state: "down" });

    state = "up";
    const page = await admin.app.inject({ url: "/status", headers: { accept: "text/html" } });
    expect(page.body).toMatch(/redis token cache <span class="badge b-up">up<\/span>/);
  });

  it("has no shared cache entry without one", async () => {
    admin = buildTestAdmin();
    const body = (await admin.app.inject({ url: "/status" })).json();
    expect(body).not.toHaveProperty("sharedTokenCache");
    const page = await admin.app.inject({ url: "/status", headers: { accept: "text/html" } });
    expect(page.body).not.toContain("redis");
  });
});
