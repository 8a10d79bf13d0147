import { afterEach, describe, expect, it } from "vitest";
import {
  buildTestAdmin,
  failedStatus,
  idleStatus,
  makeUpstreamConfig,
  type TestAdmin,
  validStatus,
} from "./helpers.js";

describe("admin probes: /livez, /readyz, /startup", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  it("/livez answers 200 whatever the token state or phase", async () => {
    admin = buildTestAdmin({
      phase: "starting",
      statuses: { files: failedStatus("BP_ERR_TOKEN_NETWORK", "token request failed") },
    });
    const res = await admin.app.inject({ method: "GET", url: "/livez" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: "ok" });
    admin.lifecycle.markDraining();
    expect((await admin.app.inject({ method: "GET", url: "/livez" })).statusCode).toBe(200);
  });

  it("/readyz follows the lifecycle: starting → running → draining", async () => {
    admin = buildTestAdmin({ phase: "starting" });
    const starting = await admin.app.inject({ method: "GET", url: "/readyz" });
    expect(starting.statusCode).toBe(503);
    expect(starting.json()).toMatchObject({ status: "starting" });

    admin.lifecycle.markStarted();
    admin.lifecycle.markRunning();
    const running = await admin.app.inject({ method: "GET", url: "/readyz" });
    expect(running.statusCode).toBe(200);
    expect(running.json()).toEqual({
      status: "ready",
      requireTokens: "all",
      summary: { upstreams: 1, ready: 1, notReady: 0, blocking: 0, byState: { valid: 1 } },
      upstreams: [{ name: "files", ready: true, state: "valid", reason: "token valid" }],
    });

    admin.lifecycle.markDraining();
    const draining = await admin.app.inject({ method: "GET", url: "/readyz" });
    expect(draining.statusCode).toBe(503);
    expect(draining.json()).toEqual({ status: "draining" });
  });

  it("/readyz names each upstream without a usable token, with its state and last error", async () => {
    admin = buildTestAdmin({
      upstreams: [
        makeUpstreamConfig("files"),
        makeUpstreamConfig("scripts"),
        makeUpstreamConfig("sheets"),
      ],
      statuses: {
        files: validStatus("t1", {
          state: "degraded",
          lastError: { code: "BP_ERR_TOKEN_HTTP", message: "answered 500", atWallMs: 1 },
        }),
        scripts: failedStatus(
          "BP_ERR_TOKEN_REJECTED",
          "token endpoint https://scripts.example.test/oauth2/token answered 401 (invalid_client)",
        ),
        sheets: idleStatus({ state: "fetching" }),
      },
    });
    const res = await admin.app.inject({ method: "GET", url: "/readyz" });
    expect(res.statusCode).toBe(503);
    const body = res.json();
    expect(body.status).toBe("not_ready");
    expect(body.upstreams).toEqual([
      {
        name: "files",
        ready: true,
        state: "degraded",
        reason: "token valid, refresh failing",
        lastError: { code: "BP_ERR_TOKEN_HTTP", message: "answered 500" },
      },
      {
        name: "scripts",
        ready: false,
        state: "failed",
        reason: "no usable token: token fetch failing",
        lastError: {
          code: "BP_ERR_TOKEN_REJECTED",
          message:
            "token endpoint https://scripts.example.test/oauth2/token answered 401 (invalid_client)",
        },
      },
      { name: "sheets", ready: false, state: "fetching", reason: "first token fetch in progress" },
    ]);
  });

  it("/readyz counts never-used lazy upstreams as ready and says so", async () => {
    const lazy = makeUpstreamConfig("lazy");
    admin = buildTestAdmin({
      upstreams: [
        makeUpstreamConfig("files"),
        { ...lazy, tokenPolicy: { ...lazy.tokenPolicy, prefetch: false } },
      ],
      statuses: { lazy: idleStatus() },
    });
    const idle = await admin.app.inject({ method: "GET", url: "/readyz" });
    expect(idle.statusCode).toBe(200);
    expect(idle.json().upstreams[1]).toEqual({
      name: "lazy",
      ready: true,
      state: "idle",
      reason: "lazy: no token fetched yet, fetched on first request",
    });
    admin.statuses.set("lazy", idleStatus({ state: "fetching" }));
    expect((await admin.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);
    // Once a lazy upstream's fetch fails it is as unready as any other.
    admin.statuses.set("lazy", failedStatus("BP_ERR_TOKEN_NETWORK", "connect ECONNREFUSED"));
    expect((await admin.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(503);
  });

  it("/readyz recovers when the token comes back", async () => {
    admin = buildTestAdmin({
      statuses: { files: failedStatus("BP_ERR_TOKEN_TIMEOUT", "timed out") },
    });
    expect((await admin.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(503);
    admin.statuses.set("files", validStatus("fresh"));
    expect((await admin.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);
  });

  it("/startup passes once the lifecycle says started", async () => {
    admin = buildTestAdmin({ phase: "starting" });
    const before = await admin.app.inject({ method: "GET", url: "/startup" });
    expect(before.statusCode).toBe(503);
    expect(before.json()).toEqual({ status: "starting" });
    admin.lifecycle.markStarted();
    const after = await admin.app.inject({ method: "GET", url: "/startup" });
    expect(after.statusCode).toBe(200);
    expect(after.json()).toEqual({ status: "started" });
  });

  it("answers HEAD on probes and 404 JSON listing the endpoints elsewhere", async () => {
    admin = buildTestAdmin();
    expect((await admin.app.inject({ method: "HEAD", url: "/livez" })).statusCode).toBe(200);
    const missing = await admin.app.inject({ method: "GET", url: "/healthz?x=1" });
    expect(missing.statusCode).toBe(404);
    expect(missing.headers["content-type"]).toMatch(/^application\/json/);
    expect(missing.json().error).toMatchObject({
      code: "not_found",
      message: "no admin endpoint GET /healthz",
    });
    expect(missing.json().error.endpoints).toContain("GET /readyz");
  });

  it("does not log probe hits", async () => {
    admin = buildTestAdmin();
    for (const url of ["/livez", "/readyz", "/startup", "/metrics", "/status"]) {
      await admin.app.inject({ method: "GET", url });
    }
    expect(admin.logLines).toEqual([]);
  });
});
