import { afterEach, describe, expect, it } from "vitest";
import {
  buildTestAdmin,
  failedStatus,
  makeUpstreamConfig,
  NOW_WALL_MS,
  type TestAdmin,
  validStatus,
} from "./helpers.js";

const EXPECTED_METRICS = [
  "bearer_proxy_requests_total",
  "bearer_proxy_request_duration_seconds",
  "bearer_proxy_requests_in_flight",
  "bearer_proxy_errors_total",
  "bearer_proxy_replays_total",
  "bearer_proxy_token_fetches_total",
  "bearer_proxy_token_fetch_duration_seconds",
  "bearer_proxy_token_expiry_timestamp_seconds",
  "bearer_proxy_redis_up",
  // Node's default process metrics.
  "process_cpu_seconds_total",
  "process_resident_memory_bytes",
  "nodejs_eventloop_lag_seconds",
];

describe("GET /metrics", () => {
  let admin: TestAdmin | undefined;
  afterEach(async () => {
    await admin?.app.close();
    admin = undefined;
  });

  it("serves every bearer_proxy_ metric and the process metrics in Prometheus text format", async () => {
    admin = buildTestAdmin();
    admin.metrics.requestsTotal.inc({ upstream: "files", method: "GET", status_class: "2xx" });
    const res = await admin.app.inject({ method: "GET", url: "/metrics" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe(admin.metrics.registry.contentType);
    expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
    const declared = new Set([...res.body.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
    for (const name of EXPECTED_METRICS) expect(declared, name).toContain(name);
    expect(res.body).toContain(
      'bearer_proxy_requests_total{upstream="files",method="GET",status_class="2xx"} 1',
    );
  });

  it("sets the token expiry gauge from the token statuses at scrape time", async () => {
    const expiresAtWallMs = NOW_WALL_MS + 540_000;
    admin = buildTestAdmin({
      upstreams: [makeUpstreamConfig("files"), makeUpstreamConfig("scripts")],
      statuses: {
        files: validStatus("a", { expiresAtWallMs }),
        scripts: failedStatus("BP_ERR_TOKEN_HTTP", "answered 500"),
      },
    });
    // A stale value for an upstream that has since lost its token must disappear.
    admin.metrics.tokenExpiryTimestampSeconds.set({ upstream: "scripts" }, 12345);
    const res = await admin.app.inject({ method: "GET", url: "/metrics" });
    expect(res.body).toContain(
      `bearer_proxy_token_expiry_timestamp_seconds{upstream="files"} ${Math.floor(expiresAtWallMs / 1000)}`,
    );
    expect(res.body).not.toContain(
      'bearer_proxy_token_expiry_timestamp_seconds{upstream="scripts"}',
    );
  });

  it("uses only configured upstream names as label values", async () => {
    admin = buildTestAdmin();
    const res = await admin.app.inject({ method: "GET", url: "/metrics" });
    const upstreamLabels = new Set([...res.body.matchAll(/upstream="([^"]*)"/g)].map((m) => m[1]));
    expect([...upstreamLabels]).toEqual(["files"]);
  });
});
